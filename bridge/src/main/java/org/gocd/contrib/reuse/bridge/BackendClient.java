package org.gocd.contrib.reuse.bridge;

import com.thoughtworks.go.plugin.api.logging.Logger;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Forwards one GoCD request to the backend: {@code POST <backend>/gocd/plugin/<request-name>}.
 *
 * <p>It never throws: GoCD treats an exception from {@code handle()} as a plugin failure, and during
 * plugin load that marks the plugin invalid until the server restarts. Every failure becomes an answer
 * with a non-200 code and a sentence that says what went wrong and how to fix it: 503 when the backend
 * cannot be reached, 504 when it does not answer in time.
 *
 * <p>Request and response bodies carry resolved secrets and the token is one: neither is ever logged.
 */
final class BackendClient {
    /** The backend could not be reached, or is not ready. */
    static final int UNREACHABLE = 503;
    /** The backend did not answer within the request's timeout. */
    static final int TIMED_OUT = 504;
    /** The bridge has no token to send (none configured, or the token file cannot be read). */
    static final int NO_TOKEN = 500;

    private static final Logger LOG = Logger.getLoggerFor(BackendClient.class);
    private static final long WARN_INTERVAL_NANOS = Duration.ofSeconds(30).toNanos();
    private static final Duration MAX_RETRY_PAUSE = Duration.ofSeconds(1);

    /** An answer to hand back to GoCD. */
    record Answer(int code, String body) {
    }

    private final BridgeSettings settings;
    private final Backend backend;
    private final String callbackUrl;
    private final HttpClient http;
    private final VersionCheck versions;
    private final AtomicLong lastWarning = new AtomicLong(System.nanoTime() - WARN_INTERVAL_NANOS);

    BackendClient(BridgeSettings settings, Backend backend, String callbackUrl, VersionCheck versions) {
        this.settings = settings;
        this.versions = versions;
        this.backend = backend;
        this.callbackUrl = callbackUrl;
        // HTTP/1.1: the backend's WSGI server speaks no HTTP/2, and an h2c upgrade attempt costs a round trip.
        this.http = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(settings.connectTimeout)
                .followRedirects(HttpClient.Redirect.NEVER)
                .executor(Executors.newCachedThreadPool(new DaemonThreads("forward")))
                .build();
    }

    /**
     * Forwards a request and returns the backend's status and body unchanged, or a failure answer.
     * Load-time requests wait up to the startup wait for a backend that is still starting.
     */
    Answer forward(String requestName, String extensionVersion, String body) {
        Duration timeout = settings.timeoutFor(requestName);
        boolean loadTime = BridgeSettings.isLoadTimeRequest(requestName);
        Duration patience = loadTime ? settings.startupWait : timeout;
        long start = System.nanoTime();
        long deadline = start + patience.toNanos();
        try {
            if (!backend.awaitReady(patience)) {
                return notReady(requestName, start);
            }
            Duration pause = Duration.ofMillis(100);
            while (true) {
                try {
                    return send(requestName, extensionVersion, body, timeout);
                } catch (HttpConnectTimeoutException e) {
                    return unreachable(requestName, "connecting timed out after "
                            + settings.connectTimeout.toMillis() + " ms");
                } catch (HttpTimeoutException e) {
                    return timedOut(requestName, timeout);
                } catch (IOException e) {
                    if (!loadTime || System.nanoTime() + pause.toNanos() > deadline) {
                        return unreachable(requestName, describe(e));
                    }
                    Thread.sleep(pause.toMillis());
                    pause = min(pause.multipliedBy(2), MAX_RETRY_PAUSE);
                    if (!backend.awaitReady(Duration.ofNanos(Math.max(1, deadline - System.nanoTime())))) {
                        return notReady(requestName, start);
                    }
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return unreachable(requestName, "the request was interrupted");
        }
    }

    private Answer send(String requestName, String extensionVersion, String body, Duration timeout)
            throws IOException, InterruptedException {
        URI base = backend.url();
        // Read once per attempt: a token file is read again each time, so a rotated Secret takes effect.
        String token = backend.token();
        if (token == null) {
            String message = backend.missingToken();
            warn(message);
            return new Answer(NO_TOKEN, message);
        }
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(base + "/gocd/plugin/" + requestName))
                .timeout(timeout)
                .header("Content-Type", "application/json")
                .header("X-GoCD-Extension-Version", extensionVersion == null ? "" : extensionVersion)
                .header("X-GoCD-Callback-URL", callbackUrl)
                .header(VersionCheck.BRIDGE_HEADER, versions.bridgeVersion())
                .POST(HttpRequest.BodyPublishers.ofString(body == null ? "" : body, StandardCharsets.UTF_8));
        request.header("Authorization", "Bearer " + token);
        HttpResponse<String> response = http.send(request.build(),
                HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
        versions.answered(response.headers().firstValue(VersionCheck.BACKEND_HEADER).orElse(null));
        if (response.statusCode() == 401) {
            warn("The backend at " + base + " refused the token (401) for " + requestName
                    + "; the bridge and the backend must share the same token (the same Secret mounted in"
                    + " both containers, or the same GOCD_ELASTIC_AGENT_TOKEN).");
        }
        return new Answer(response.statusCode(), response.body());
    }

    /** Says how long it really waited: a backend that failed to start ends the wait early. */
    private Answer notReady(String requestName, long since) {
        return unreachable(requestName, "it is not ready after "
                + Duration.ofNanos(System.nanoTime() - since).toMillis() + " ms");
    }

    private Answer unreachable(String requestName, String why) {
        String message = "The kubernetes-reuse elastic agent backend at " + backend.url()
                + " could not be reached for " + requestName + " (" + why + "). " + backend.remedy();
        warn(message);
        return new Answer(UNREACHABLE, message);
    }

    private Answer timedOut(String requestName, Duration timeout) {
        String property = requestName.endsWith("should-assign-work") ? BridgeSettings.TIMEOUT_SHOULD_ASSIGN_WORK
                : requestName.endsWith("create-agent") ? BridgeSettings.TIMEOUT_CREATE_AGENT
                : requestName.endsWith("-status-report") ? BridgeSettings.TIMEOUT_STATUS_REPORT
                : BridgeSettings.TIMEOUT_DEFAULT;
        String message = "The kubernetes-reuse elastic agent backend at " + backend.url() + " did not answer "
                + requestName + " within " + timeout.toMillis() + " ms. Check that the backend is healthy and "
                + "can reach the Kubernetes API, or raise the system property " + property + ".";
        warn(message);
        return new Answer(TIMED_OUT, message);
    }

    /** Logs a warning at most every 30 s: agents poll often, and a down backend must not flood the log. */
    private void warn(String message) {
        long now = System.nanoTime();
        long last = lastWarning.get();
        if (now - last >= WARN_INTERVAL_NANOS && lastWarning.compareAndSet(last, now)) {
            LOG.warn(message);
        }
    }

    private static String describe(IOException e) {
        String type = e.getClass().getSimpleName();
        return e.getMessage() == null ? type : type + ": " + e.getMessage();
    }

    private static Duration min(Duration a, Duration b) {
        return a.compareTo(b) <= 0 ? a : b;
    }
}
