package org.gocd.contrib.reuse.bridge;

import com.thoughtworks.go.plugin.api.request.GoApiRequest;
import com.thoughtworks.go.plugin.api.response.DefaultGoApiResponse;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The backend's calls to the server: POST /gocd/server/<api> → GoApplicationAccessor.submit. */
class CallbackTest {
    private static final String TOKEN = "callback-token";
    private final HttpClient http = HttpClient.newHttpClient();
    private FakeBackend backend;
    private KubernetesReuseElasticAgentPlugin plugin;
    private RecordingAccessor accessor;
    private String callbackUrl;

    @BeforeEach
    void setUp() throws Exception {
        backend = new FakeBackend();
        Map<String, String> properties = Map.of("gocd.reuse.backend.url", backend.url(), "gocd.reuse.token", TOKEN);
        plugin = new KubernetesReuseElasticAgentPlugin(() -> BridgeSettings.of(properties));
        callbackUrl = plugin.bridge().callbackUrl();
    }

    @AfterEach
    void tearDown() {
        plugin.close();
        backend.close();
    }

    private HttpResponse<String> post(String path, String token, String version, String body) throws Exception {
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(callbackUrl + path))
                .POST(HttpRequest.BodyPublishers.ofString(body));
        if (token != null) {
            request.header("Authorization", "Bearer " + token);
        }
        if (version != null) {
            request.header("X-GoCD-API-Version", version);
        }
        return http.send(request.build(), HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void callsReachTheAccessorWithNameVersionAndBody() throws Exception {
        accessor = new RecordingAccessor();
        plugin.initializeGoApplicationAccessor(accessor);
        String body = "[{\"agent_id\":\"pod-1\"}]";

        HttpResponse<String> response = post("/gocd/server/go.processor.elastic-agents.disable-agents", TOKEN,
                "1.0", body);

        assertEquals(200, response.statusCode());
        GoApiRequest call = accessor.calls.get(0);
        assertEquals("go.processor.elastic-agents.disable-agents", call.api());
        assertEquals("1.0", call.apiVersion());
        assertEquals(body, call.requestBody());
        assertEquals("elastic-agent", call.pluginIdentifier().getExtension());
    }

    @Test
    void answerComesBackUnchanged() throws Exception {
        accessor = new RecordingAccessor();
        plugin.initializeGoApplicationAccessor(accessor);

        HttpResponse<String> response = post("/gocd/server/go.processor.server-info.get", TOKEN, null, "");

        assertEquals(200, response.statusCode());
        assertTrue(response.body().contains("\"server_id\":\"test-server-id\""));
        assertEquals("1.0", accessor.calls.get(0).apiVersion());
        assertNull(accessor.calls.get(0).requestBody());
    }

    @Test
    void nonSuccessCodesFromGocdArePassedOn() throws Exception {
        plugin.initializeGoApplicationAccessor(new RecordingAccessor(r -> {
            DefaultGoApiResponse response = new DefaultGoApiResponse(404);
            response.setResponseBody("unknown api");
            return response;
        }));
        HttpResponse<String> response = post("/gocd/server/go.processor.nope", TOKEN, null, "");
        assertEquals(404, response.statusCode());
        assertEquals("unknown api", response.body());
    }

    @Test
    void consoleLogDefaultsToVersionTwo() throws Exception {
        accessor = new RecordingAccessor();
        plugin.initializeGoApplicationAccessor(accessor);
        post("/gocd/server/go.processor.console-log.append", TOKEN, null, "{\"text\":\"hi\"}");
        post("/gocd/server/go.processor.elastic-agents.list-agents", TOKEN, null, "");
        post("/gocd/server/go.processor.console-log.append", TOKEN, "1.0", "{\"text\":\"hi\"}");
        assertEquals("2.0", accessor.calls.get(0).apiVersion());
        assertEquals("1.0", accessor.calls.get(1).apiVersion());
        assertEquals("1.0", accessor.calls.get(2).apiVersion());
    }

    @Test
    void wrongOrMissingTokenIsRefused() throws Exception {
        accessor = new RecordingAccessor();
        plugin.initializeGoApplicationAccessor(accessor);
        assertEquals(401, post("/gocd/server/go.processor.server-info.get", "wrong", null, "").statusCode());
        assertEquals(401, post("/gocd/server/go.processor.server-info.get", null, null, "").statusCode());
        assertEquals(401, post("/gocd/server/go.processor.server-info.get", TOKEN + "x", null, "").statusCode());
        assertTrue(accessor.calls.isEmpty());
    }

    @Test
    void beforeGocdGivesTheAccessorCallsAreAskedToRetry() throws Exception {
        assertEquals(503, post("/gocd/server/go.processor.server-info.get", TOKEN, null, "").statusCode());
    }

    @Test
    void otherPathsAndMethodsAreRejected() throws Exception {
        plugin.initializeGoApplicationAccessor(new RecordingAccessor());
        assertEquals(404, post("/gocd/plugin/x", TOKEN, null, "").statusCode());
        assertEquals(404, post("/gocd/server/", TOKEN, null, "").statusCode());
        HttpResponse<String> get = http.send(HttpRequest.newBuilder(
                URI.create(callbackUrl + "/gocd/server/go.processor.server-info.get")).GET().build(),
                HttpResponse.BodyHandlers.ofString());
        assertEquals(405, get.statusCode());
    }

    @Test
    void exceptionsFromGocdBecome500() throws Exception {
        plugin.initializeGoApplicationAccessor(new RecordingAccessor(r -> {
            throw new IllegalArgumentException("Unsupported API version: 9.0");
        }));
        HttpResponse<String> response = post("/gocd/server/go.processor.server-info.get", TOKEN, "9.0", "");
        assertEquals(500, response.statusCode());
        assertTrue(response.body().contains("Unsupported API version"), response.body());

        plugin.initializeGoApplicationAccessor(new RecordingAccessor(r -> {
            throw new StackOverflowError();
        }));
        assertEquals(500, post("/gocd/server/go.processor.server-info.get", TOKEN, null, "").statusCode());
    }

    @Test
    void callbackListensOnLoopbackOnDaemonThreads() throws Exception {
        plugin.initializeGoApplicationAccessor(new RecordingAccessor());
        assertTrue(callbackUrl.startsWith("http://127.0.0.1:"));
        post("/gocd/server/go.processor.server-info.get", TOKEN, null, "");
        plugin.handle(ForwardingTest.request("server-ping", "{}"));
        for (Thread thread : Thread.getAllStackTraces().keySet()) {
            String name = thread.getName();
            if (name.startsWith("kubernetes-reuse") || name.startsWith("HTTP-Dispatcher")) {
                assertTrue(thread.isDaemon(), name + " must be a daemon thread");
            }
        }
    }

    @Test
    void answersWithoutTheNagleDelayedAckStall() throws Exception {
        plugin.initializeGoApplicationAccessor(new RecordingAccessor());
        long[] nanos = new long[41];
        for (int i = 0; i < nanos.length; i++) {
            long start = System.nanoTime();
            assertEquals(200, post("/gocd/server/go.processor.server-info.get", TOKEN, null, "").statusCode());
            nanos[i] = System.nanoTime() - start;
        }
        java.util.Arrays.sort(nanos);
        long medianMillis = nanos[nanos.length / 2] / 1_000_000;
        assertTrue(medianMillis < 25, "median callback round trip " + medianMillis + " ms (TCP_NODELAY off?)");
    }

    @Test
    void stoppingFreesThePort() throws Exception {
        int port = URI.create(callbackUrl).getPort();
        plugin.close();
        try (java.net.ServerSocket socket = new java.net.ServerSocket(port, 1,
                java.net.InetAddress.getLoopbackAddress())) {
            assertEquals(port, socket.getLocalPort());
        }
    }
}
