package org.gocd.contrib.reuse.bridge;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import com.thoughtworks.go.plugin.api.GoApplicationAccessor;
import com.thoughtworks.go.plugin.api.GoPluginIdentifier;
import com.thoughtworks.go.plugin.api.logging.Logger;
import com.thoughtworks.go.plugin.api.request.DefaultGoApiRequest;
import com.thoughtworks.go.plugin.api.response.GoApiResponse;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import java.util.regex.Pattern;

/**
 * The loopback endpoint through which the backend calls the GoCD server.
 *
 * <p>The backend is another process and cannot hold a {@link GoApplicationAccessor}, so it posts to
 * {@code http://127.0.0.1:<port>/gocd/server/<api-name>} with the shared token, and this server submits
 * the call through the accessor GoCD gave the plugin, answering with GoCD's code and body unchanged.
 *
 * <p>It binds to loopback only, checks the token in constant time, runs on daemon threads (GoCD requires
 * them; the JDK's dispatcher thread inherits daemon status from the thread that starts the server, so it
 * is started from one) and catches every {@link Throwable}, because an exception escaping a handler would
 * leave the backend waiting for an answer that never comes.
 *
 * <p>It switches on TCP_NODELAY for the JDK's HTTP server ({@code sun.net.httpserver.nodelay}, read once
 * when the JDK's server configuration loads) unless the administrator set that property: the server writes
 * headers and body as two segments, and with Nagle's algorithm against the caller's delayed ACK every
 * answer stalls about 40 ms, which would slow every server call the backend makes.
 */
final class CallbackServer {
    static final String PATH_PREFIX = "/gocd/server/";

    private static final Logger LOG = Logger.getLoggerFor(CallbackServer.class);
    private static final Pattern API_NAME = Pattern.compile("[A-Za-z0-9_.\\-]+");
    private static final int WORKERS = 8;

    static {
        enableNoDelay();
    }

    private final int requestedPort;
    private final Supplier<String> token;
    private final Supplier<GoApplicationAccessor> accessor;
    private final GoPluginIdentifier identifier;
    private HttpServer server;
    private ExecutorService workers;

    /**
     * @param port      the port to bind on 127.0.0.1; 0 picks a free one
     * @param token     the token callers must present (read per call: it may be generated later)
     * @param accessor  the accessor GoCD gave the plugin, or null before GoCD has given one
     * @param identifier the plugin's identifier, which GoCD requires on every server call
     */
    CallbackServer(int port, Supplier<String> token, Supplier<GoApplicationAccessor> accessor,
                   GoPluginIdentifier identifier) {
        this.requestedPort = port;
        this.token = token;
        this.accessor = accessor;
        this.identifier = identifier;
    }

    /** Binds and starts serving; returns the port. */
    synchronized int start() throws IOException {
        if (server != null) {
            return port();
        }
        HttpServer created = HttpServer.create(
                new InetSocketAddress(InetAddress.getLoopbackAddress(), requestedPort), 64);
        workers = Executors.newFixedThreadPool(WORKERS, new DaemonThreads("callback"));
        created.setExecutor(workers);
        created.createContext("/", this::serve);
        AtomicReference<RuntimeException> failure = new AtomicReference<>();
        Thread starter = DaemonThreads.start("callback-start", () -> {
            try {
                created.start();
            } catch (RuntimeException e) {
                failure.set(e);
            }
        });
        try {
            starter.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while starting the callback server", e);
        }
        if (failure.get() != null) {
            throw failure.get();
        }
        server = created;
        LOG.info("Callback endpoint for the backend listening on " + url() + ".");
        return port();
    }

    synchronized int port() {
        return server.getAddress().getPort();
    }

    /** The base URL the backend calls, as sent in {@code X-GoCD-Callback-URL}. */
    synchronized String url() {
        return "http://127.0.0.1:" + port();
    }

    /** Stops serving at once and ends the worker threads. Safe to call more than once. */
    synchronized void stop() {
        if (server != null) {
            server.stop(0);
            workers.shutdownNow();
            server = null;
        }
    }

    private void serve(HttpExchange exchange) {
        try (exchange) {
            try {
                handle(exchange);
            } catch (Throwable t) {
                // Deliberately broad: the backend must always get an answer.
                LOG.error("The callback " + exchange.getRequestURI().getPath() + " failed: "
                        + t.getClass().getName());
                reply(exchange, 500, "The GoCD server call failed inside the plugin bridge ("
                        + t.getClass().getSimpleName() + (t.getMessage() == null ? "" : ": " + t.getMessage())
                        + "). See the GoCD server log and the plugin log.");
            }
        } catch (Throwable ignored) {
            // The caller went away while we answered; nothing is left to tell it.
        }
    }

    private void handle(HttpExchange exchange) throws IOException {
        String path = exchange.getRequestURI().getPath();
        String api = path.startsWith(PATH_PREFIX) ? path.substring(PATH_PREFIX.length()) : "";
        if (!API_NAME.matcher(api).matches()) {
            reply(exchange, 404, "Not found: server calls go to POST " + PATH_PREFIX + "<api-name>.");
            return;
        }
        if (!"POST".equals(exchange.getRequestMethod())) {
            exchange.getResponseHeaders().set("Allow", "POST");
            reply(exchange, 405, "Server calls must be POST requests.");
            return;
        }
        if (!Secrets.bearerMatches(exchange.getRequestHeaders().getFirst("Authorization"), token.get())) {
            reply(exchange, 401, "Missing or wrong token: send Authorization: Bearer <the shared token>.");
            return;
        }
        GoApplicationAccessor goServer = accessor.get();
        if (goServer == null) {
            reply(exchange, 503, "GoCD has not yet given the plugin access to the server; retry shortly.");
            return;
        }
        String version = exchange.getRequestHeaders().getFirst("X-GoCD-API-Version");
        if (version == null || version.isBlank()) {
            version = defaultVersion(api);
        }
        String body = readBody(exchange.getRequestBody());
        DefaultGoApiRequest request = new DefaultGoApiRequest(api, version.trim(), identifier);
        request.setRequestBody(body.isEmpty() ? null : body);
        GoApiResponse response = goServer.submit(request);
        if (response == null) {
            reply(exchange, 500, "The GoCD server gave no answer to " + api + ".");
            return;
        }
        reply(exchange, response.responseCode(), response.responseBody());
    }

    /** Asks the JDK's HTTP server for TCP_NODELAY, unless someone chose otherwise. */
    static void enableNoDelay() {
        try {
            if (System.getProperty("sun.net.httpserver.nodelay") == null) {
                System.setProperty("sun.net.httpserver.nodelay", "true");
            }
        } catch (SecurityException e) {
            // a locked-down JVM: slower callbacks, nothing worse
        }
    }

    /** The API version GoCD expects when the caller names none (see docs/architecture.md, "Calls into GoCD"). */
    static String defaultVersion(String api) {
        return "go.processor.console-log.append".equals(api) ? "2.0" : "1.0";
    }

    private static String readBody(InputStream in) throws IOException {
        try (in) {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    private static void reply(HttpExchange exchange, int code, String body) throws IOException {
        byte[] bytes = body == null ? new byte[0] : body.getBytes(StandardCharsets.UTF_8);
        exchange.getResponseHeaders().set("Content-Type",
                code >= 200 && code < 300 ? "application/json; charset=utf-8" : "text/plain; charset=utf-8");
        exchange.sendResponseHeaders(code, bytes.length == 0 ? -1 : bytes.length);
        if (bytes.length > 0) {
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(bytes);
            }
        }
    }
}
