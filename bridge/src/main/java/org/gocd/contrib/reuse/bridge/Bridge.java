package org.gocd.contrib.reuse.bridge;

import com.thoughtworks.go.plugin.api.GoApplicationAccessor;
import com.thoughtworks.go.plugin.api.GoPluginIdentifier;
import com.thoughtworks.go.plugin.api.logging.Logger;

import java.io.IOException;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

/**
 * The running parts of the bridge, wired together: the callback server, the backend (launched or
 * external), the forwarding client and the check of the backend's version against the jar's.
 *
 * <p>Kept apart from the plugin class because GoCD instantiates that class eagerly and expects its
 * constructor to do no I/O; the bridge is built on the first request instead. It stops on plugin unload
 * or, failing that, through a JVM shutdown hook so a launched backend never outlives the server.
 */
final class Bridge {
    private static final Logger LOG = Logger.getLoggerFor(Bridge.class);

    private final BridgeSettings settings;
    private final CallbackServer callbackServer;
    private final BackendProcess process;
    private final BackendClient client;
    private final Backend backend;
    private final VersionCheck versions = new VersionCheck();
    private final Thread shutdownHook;

    private Bridge(BridgeSettings settings, Supplier<GoApplicationAccessor> accessor, GoPluginIdentifier identifier)
            throws IOException {
        this.settings = settings;
        // The callback server must exist first (the backend needs its URL), but checks the backend's token:
        // until the backend is chosen, every callback is refused.
        AtomicReference<Backend> current = new AtomicReference<>();
        this.callbackServer = new CallbackServer(settings.callbackPort,
                () -> current.get() == null ? null : current.get().token(), accessor, identifier);
        String callbackUrl;
        try {
            callbackServer.start();
            callbackUrl = callbackServer.url();
        } catch (IOException | RuntimeException e) {
            throw new IOException("The plugin bridge could not open its callback port 127.0.0.1:"
                    + settings.callbackPort + " (" + BridgeSettings.CALLBACK_PORT + "): " + e.getMessage(), e);
        }
        if (settings.launchesBackend()) {
            process = new BackendProcess(settings, callbackUrl);
            backend = process;
        } else {
            process = null;
            backend = Backend.external(settings.backendUrl, settings);
        }
        current.set(backend);
        client = new BackendClient(settings, backend, callbackUrl, versions);
        shutdownHook = new Thread(this::stop, "kubernetes-reuse-bridge-shutdown");
        Runtime.getRuntime().addShutdownHook(shutdownHook);
        if (process != null) {
            process.start();
        }
        LOG.info("Bridge " + versions.bridgeVersion() + (process != null
                ? " started; launching the backend with '" + String.join(" ", settings.backendCommand) + "'."
                : " started; forwarding to the backend at " + settings.backendUrl + "."));
    }

    /** Starts the callback server, and the backend when a command is configured. */
    static Bridge start(BridgeSettings settings, Supplier<GoApplicationAccessor> accessor,
                        GoPluginIdentifier identifier) throws IOException {
        return new Bridge(settings, accessor, identifier);
    }

    /** Forwards one request; never throws. */
    BackendClient.Answer forward(String requestName, String extensionVersion, String body) {
        return client.forward(requestName, extensionVersion, body);
    }

    /** The callback URL sent to the backend. */
    String callbackUrl() {
        return callbackServer.url();
    }

    Backend backend() {
        return backend;
    }

    /** The jar's version and the backend's, as its last answer said it. */
    VersionCheck versions() {
        return versions;
    }

    /** Stops the launched backend and the callback server. Safe to call more than once. */
    void stop() {
        if (process != null) {
            process.stop();
        }
        callbackServer.stop();
    }

    /** Stops now and forgets the shutdown hook (plugin unload; the JVM goes on). */
    void close() {
        stop();
        try {
            Runtime.getRuntime().removeShutdownHook(shutdownHook);
        } catch (IllegalStateException e) {
            // the JVM is already shutting down; the hook runs anyway and stop() is idempotent
        }
    }
}
