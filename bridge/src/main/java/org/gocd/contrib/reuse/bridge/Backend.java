package org.gocd.contrib.reuse.bridge;

import java.net.URI;
import java.time.Duration;

/**
 * Where the backend answers and with which token: either a backend the administrator runs (fixed URL and
 * token) or one the bridge launched, whose port and readiness change when it restarts.
 */
interface Backend {
    /** The base URL, without a trailing slash. */
    URI url();

    /** The shared token, or null when none is configured (or the token file cannot be read). */
    String token();

    /** Why {@link #token()} is null, as a sentence for the administrator. */
    default String missingToken() {
        return "The kubernetes-reuse plugin bridge has no token for its backend.";
    }

    /**
     * Waits until the backend is believed ready, at most {@code limit}. A backend the bridge does not
     * run is always believed ready: the request itself finds out.
     */
    boolean awaitReady(Duration limit) throws InterruptedException;

    /** What an administrator should do when the backend cannot be reached. */
    String remedy();

    /**
     * A backend run outside GoCD (a sidecar or a service) at a configured URL, with the token from the
     * settings: the token itself, or the token file read at every call (the Secret may be rotated).
     */
    static Backend external(URI url, BridgeSettings settings) {
        return new Backend() {
            @Override
            public URI url() {
                return url;
            }

            @Override
            public String token() {
                return settings.currentToken().value();
            }

            @Override
            public String missingToken() {
                String why = settings.currentToken().problem();
                return "The kubernetes-reuse plugin bridge cannot call its backend: "
                        + (why == null ? "no token is configured" : why) + ". Set the system property "
                        + BridgeSettings.TOKEN + " or the environment variable " + BridgeSettings.TOKEN_ENV
                        + " to the backend's token, or " + BridgeSettings.TOKEN_FILE + " (environment variable "
                        + BridgeSettings.environmentName(BridgeSettings.TOKEN_FILE) + ") to a file holding it, or set "
                        + BridgeSettings.BACKEND_COMMAND + " to let the plugin start the backend with a token of its own.";
            }

            @Override
            public boolean awaitReady(Duration limit) {
                return true;
            }

            @Override
            public String remedy() {
                return "Start the backend (python3 -m elastic_agent serve --bind HOST:PORT, with the same token in "
                        + BridgeSettings.TOKEN_ENV + " or --token-file FILE), or point the system property " + BridgeSettings.BACKEND_URL
                        + " (environment variable " + BridgeSettings.environmentName(BridgeSettings.BACKEND_URL)
                        + ") at where it runs, or set " + BridgeSettings.BACKEND_COMMAND
                        + " to let the plugin start it.";
            }
        };
    }
}
