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

    /** The shared token, or null when none is configured. */
    String token();

    /**
     * Waits until the backend is believed ready, at most {@code limit}. A backend the bridge does not
     * run is always believed ready: the request itself finds out.
     */
    boolean awaitReady(Duration limit) throws InterruptedException;

    /** What an administrator should do when the backend cannot be reached. */
    String remedy();

    /** A backend run outside GoCD (a sidecar or a service) at a configured URL. */
    static Backend external(URI url, String token) {
        return new Backend() {
            @Override
            public URI url() {
                return url;
            }

            @Override
            public String token() {
                return token;
            }

            @Override
            public boolean awaitReady(Duration limit) {
                return true;
            }

            @Override
            public String remedy() {
                return "Start the backend (python3 -m elastic_agent serve --bind HOST:PORT, with the same token in "
                        + BridgeSettings.TOKEN_ENV + "), or point the system property " + BridgeSettings.BACKEND_URL
                        + " (environment variable " + BridgeSettings.environmentName(BridgeSettings.BACKEND_URL)
                        + ") at where it runs, or set " + BridgeSettings.BACKEND_COMMAND
                        + " to let the plugin start it.";
            }
        };
    }
}
