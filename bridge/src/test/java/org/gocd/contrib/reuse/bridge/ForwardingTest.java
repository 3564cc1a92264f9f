package org.gocd.contrib.reuse.bridge;

import com.thoughtworks.go.plugin.api.request.DefaultGoPluginApiRequest;
import com.thoughtworks.go.plugin.api.response.GoPluginApiResponse;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** handle() → POST <backend>/gocd/plugin/<name>, and the answer back, through the real API classes. */
class ForwardingTest {
    private static final String TOKEN = "test-token-123";
    private FakeBackend backend;
    private KubernetesReuseElasticAgentPlugin plugin;

    @AfterEach
    void tearDown() throws Exception {
        if (plugin != null) {
            plugin.close();
        }
        if (backend != null) {
            backend.close();
        }
    }

    private KubernetesReuseElasticAgentPlugin pluginFor(String url, Map<String, String> extra) {
        Map<String, String> properties = new HashMap<>(extra);
        properties.put("gocd.reuse.backend.url", url);
        properties.putIfAbsent("gocd.reuse.token", TOKEN);
        plugin = new KubernetesReuseElasticAgentPlugin(() -> BridgeSettings.of(properties));
        plugin.initializeGoApplicationAccessor(new RecordingAccessor());
        return plugin;
    }

    static DefaultGoPluginApiRequest request(String name, String body) {
        DefaultGoPluginApiRequest request = new DefaultGoPluginApiRequest("elastic-agent", "5.0",
                "cd.go.elastic-agent." + name);
        request.setRequestBody(body);
        return request;
    }

    @Test
    void forwardsPathHeadersAndBodyVerbatim() throws Exception {
        backend = new FakeBackend().answering(r -> FakeBackend.Reply.of(200, "true"));
        pluginFor(backend.url(), Map.of());
        String body = "{\"agent\":{\"agent_id\":\"pod-1\"},\"job_identifier\":{\"job_id\":42},\"ü\":\"{{SECRET}}\"}";

        GoPluginApiResponse response = plugin.handle(request("should-assign-work", body));

        assertEquals(200, response.responseCode());
        assertEquals("true", response.responseBody());
        FakeBackend.Received seen = backend.last();
        assertEquals("POST", seen.method());
        assertEquals("/gocd/plugin/cd.go.elastic-agent.should-assign-work", seen.path());
        assertEquals("Bearer " + TOKEN, seen.header("Authorization"));
        assertEquals("5.0", seen.header("X-GoCD-Extension-Version"));
        assertEquals("application/json", seen.header("Content-Type"));
        assertEquals(System.getProperty("bridge.plugin.version"), seen.header("X-GoCD-Reuse-Bridge-Version"));
        assertEquals(plugin.bridge().callbackUrl(), seen.header("X-GoCD-Callback-URL"));
        assertTrue(seen.header("X-GoCD-Callback-URL").matches("http://127\\.0\\.0\\.1:\\d+"));
        assertEquals(body, seen.body());
    }

    @Test
    void missingBodyIsSentAsEmpty() throws Exception {
        backend = new FakeBackend();
        pluginFor(backend.url(), Map.of());
        plugin.handle(request("get-icon", null));
        assertEquals("", backend.last().body());
    }

    @Test
    void statusAndBodyComeBackUnchanged() throws Exception {
        backend = new FakeBackend().answering(r -> FakeBackend.Reply.of(422,
                "[{\"key\":\"Image\",\"message\":\"Image must not be blank\"}]"));
        pluginFor(backend.url(), Map.of());

        GoPluginApiResponse response = plugin.handle(request("validate-elastic-agent-profile", "{}"));

        assertEquals(422, response.responseCode());
        assertEquals("[{\"key\":\"Image\",\"message\":\"Image must not be blank\"}]", response.responseBody());
    }

    @Test
    void slowShouldAssignWorkTimesOutWithAClearAnswer() throws Exception {
        backend = new FakeBackend().answering(r -> new FakeBackend.Reply(200, "true", 3_000));
        pluginFor(backend.url(), Map.of("gocd.reuse.timeout.should-assign-work.ms", "200"));

        long start = System.nanoTime();
        GoPluginApiResponse response = plugin.handle(request("should-assign-work", "{}"));
        long tookMillis = (System.nanoTime() - start) / 1_000_000;

        assertEquals(504, response.responseCode());
        assertTrue(response.responseBody().contains("did not answer cd.go.elastic-agent.should-assign-work within 200 ms"),
                response.responseBody());
        assertTrue(response.responseBody().contains("gocd.reuse.timeout.should-assign-work.ms"));
        assertTrue(tookMillis < 2_000, "took " + tookMillis + " ms");
    }

    @Test
    void otherRequestsHaveTheirOwnLongerTimeout() throws Exception {
        backend = new FakeBackend().answering(r -> new FakeBackend.Reply(200, "{}", 500));
        pluginFor(backend.url(), Map.of("gocd.reuse.timeout.should-assign-work.ms", "200"));
        assertEquals(200, plugin.handle(request("create-agent", "{}")).responseCode());
    }

    @Test
    void unreachableBackendGivesAClearNon200Answer() throws Exception {
        String url = "http://127.0.0.1:" + closedPort();
        pluginFor(url, Map.of());

        GoPluginApiResponse response = plugin.handle(request("create-agent", "{}"));

        assertEquals(503, response.responseCode());
        assertTrue(response.responseBody().contains("backend at " + url + " could not be reached"),
                response.responseBody());
        assertTrue(response.responseBody().contains("gocd.reuse.backend.url"));
        assertFalse(response.responseBody().contains(TOKEN));
    }

    @Test
    void loadTimeRequestsWaitForABackendThatIsStillStarting() throws Exception {
        int port = closedPort();
        pluginFor("http://127.0.0.1:" + port, Map.of("gocd.reuse.backend.startup-wait.ms", "10000"));
        CompletableFuture<GoPluginApiResponse> migrate =
                CompletableFuture.supplyAsync(() -> plugin.handle(request("migrate-config", "{\"a\":1}")));
        Thread.sleep(700);
        assertFalse(migrate.isDone());
        backend = new FakeBackend(port).answering(r -> FakeBackend.Reply.of(200, r.body()));

        GoPluginApiResponse response = migrate.get();

        assertEquals(200, response.responseCode());
        assertEquals("{\"a\":1}", response.responseBody());
    }

    @Test
    void loadTimeWaitIsBounded() throws Exception {
        pluginFor("http://127.0.0.1:" + closedPort(), Map.of("gocd.reuse.backend.startup-wait.ms", "500"));
        long start = System.nanoTime();
        GoPluginApiResponse response = plugin.handle(request("get-icon", null));
        assertEquals(503, response.responseCode());
        assertTrue((System.nanoTime() - start) / 1_000_000 < 3_000);
    }

    @Test
    void missingTokenIsExplainedNotSentAnyway() throws Exception {
        backend = new FakeBackend();
        Map<String, String> properties = Map.of("gocd.reuse.backend.url", backend.url());
        plugin = new KubernetesReuseElasticAgentPlugin(() -> BridgeSettings.of(properties));

        GoPluginApiResponse response = plugin.handle(request("server-ping", "{}"));

        assertEquals(500, response.responseCode());
        assertTrue(response.responseBody().contains("GOCD_ELASTIC_AGENT_TOKEN"), response.responseBody());
        assertTrue(backend.received.isEmpty());
    }

    @Test
    void tokenFileIsReadAtEveryRequestAndCallback(@TempDir Path dir) throws Exception {
        backend = new FakeBackend();
        Path file = dir.resolve("token");
        Files.writeString(file, "first-token\n");
        Map<String, String> properties = Map.of("gocd.reuse.backend.url", backend.url(),
                "gocd.reuse.token.file", file.toString());
        plugin = new KubernetesReuseElasticAgentPlugin(() -> BridgeSettings.of(properties));
        plugin.initializeGoApplicationAccessor(new RecordingAccessor());
        String callback = plugin.bridge().callbackUrl() + "/gocd/server/go.processor.server-info.get";

        assertEquals(200, plugin.handle(request("server-ping", "{}")).responseCode());
        assertEquals("Bearer first-token", backend.last().header("Authorization"), "the newline is not sent");
        assertEquals(200, callback(callback, "first-token"));

        Files.writeString(file, "second-token\n");  // the Secret was rotated
        assertEquals(200, plugin.handle(request("server-ping", "{}")).responseCode());
        assertEquals("Bearer second-token", backend.last().header("Authorization"));
        assertEquals(200, callback(callback, "second-token"));
        assertEquals(401, callback(callback, "first-token"));

        Files.delete(file);
        int sent = backend.received.size();
        GoPluginApiResponse response = plugin.handle(request("server-ping", "{}"));
        assertEquals(500, response.responseCode());
        assertTrue(response.responseBody().contains("the token file " + file + " (gocd.reuse.token.file) could not be read"),
                response.responseBody());
        assertTrue(response.responseBody().contains("GOCD_REUSE_TOKEN_FILE"), response.responseBody());
        assertEquals(sent, backend.received.size(), "nothing sent without a token");
        assertEquals(401, callback(callback, "second-token"));
    }

    private static int callback(String url, String token) throws Exception {
        return HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(url))
                        .header("Authorization", "Bearer " + token).POST(HttpRequest.BodyPublishers.noBody()).build(),
                HttpResponse.BodyHandlers.discarding()).statusCode();
    }

    @Test
    void brokenConfigurationIsAnsweredNotThrown() throws Exception {
        plugin = new KubernetesReuseElasticAgentPlugin(
                () -> BridgeSettings.of(Map.of("gocd.reuse.timeout.default.ms", "soon")));
        GoPluginApiResponse response = plugin.handle(request("server-ping", "{}"));
        assertNotEquals(200, response.responseCode());
        assertTrue(response.responseBody().contains("gocd.reuse.timeout.default.ms"), response.responseBody());
    }

    @Test
    void identifierIsElasticAgentFive() throws Exception {
        KubernetesReuseElasticAgentPlugin fresh = new KubernetesReuseElasticAgentPlugin();
        assertEquals("elastic-agent", fresh.pluginIdentifier().getExtension());
        assertEquals(java.util.List.of("5.0"), fresh.pluginIdentifier().getSupportedExtensionVersions());
    }

    static int closedPort() throws Exception {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return socket.getLocalPort();
        }
    }
}
