package org.gocd.contrib.reuse.bridge;

import com.thoughtworks.go.plugin.api.response.GoPluginApiResponse;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The command mode: the bridge launches, health-checks, restarts and stops a real child process. */
@Timeout(60)
class BackendProcessTest {
    private KubernetesReuseElasticAgentPlugin plugin;

    @AfterEach
    void tearDown() {
        if (plugin != null) {
            plugin.close();
        }
    }

    /** A command line that runs {@link FakeBackendMain} with this JVM and this test classpath. */
    static String fakeBackendCommand() {
        return fakeBackendCommand("serve");
    }

    private static String fakeBackendCommand(String mode) {
        String java = ProcessHandle.current().info().command().orElse("java");
        return quote(java) + " -cp " + quote(System.getProperty("java.class.path")) + " "
                + FakeBackendMain.class.getName() + " " + mode;
    }

    /** Quotes one argument for {@link BridgeSettings#splitCommand}. */
    static String quote(String s) {
        return "'" + s.replace("'", "'\\''") + "'";
    }

    private KubernetesReuseElasticAgentPlugin launching(Map<String, String> extra) {
        Map<String, String> properties = new java.util.HashMap<>(extra);
        properties.put("gocd.reuse.backend.command", fakeBackendCommand());
        properties.put("gocd.reuse.backend.restart-backoff-max.ms", "500");
        plugin = new KubernetesReuseElasticAgentPlugin(() -> BridgeSettings.of(properties));
        plugin.initializeGoApplicationAccessor(new RecordingAccessor());
        return plugin;
    }

    private static long pid(GoPluginApiResponse response) {
        Matcher m = Pattern.compile("pid=(\\d+)").matcher(response.responseBody());
        assertTrue(m.find(), response.responseBody());
        return Long.parseLong(m.group(1));
    }

    @Test
    void launchesTheBackendWithAFreshTokenInItsEnvironmentAndWaitsForHealth() throws Exception {
        launching(Map.of());

        GoPluginApiResponse response = plugin.handle(ForwardingTest.request("get-capabilities", null));

        assertEquals(200, response.responseCode(), response.responseBody());
        String body = response.responseBody();
        String token = plugin.bridge().backend().token();
        assertTrue(token.length() >= 40);
        assertTrue(body.contains("args=serve --bind 127.0.0.1:" + plugin.bridge().backend().url().getPort()), body);
        assertFalse(body.contains(token), "the token must not be on the command line");
        assertTrue(body.contains("callback-env=" + plugin.bridge().callbackUrl()), body);
        assertTrue(body.contains("callback-header=" + plugin.bridge().callbackUrl()), body);
        Optional<String> commandLine = ProcessHandle.of(pid(response)).flatMap(p -> p.info().commandLine());
        commandLine.ifPresent(line -> assertFalse(line.contains(token)));
    }

    @Test
    void theBackendCanCallTheServerThroughTheCallbackEndpoint() {
        launching(Map.of());
        RecordingAccessor accessor = new RecordingAccessor();
        plugin.initializeGoApplicationAccessor(accessor);

        GoPluginApiResponse response = plugin.handle(ForwardingTest.request("server-ping", "{}"));

        assertEquals("200 []", response.responseBody());
        assertEquals("go.processor.elastic-agents.list-agents", accessor.apiNames().get(0));
    }

    @Test
    void restartsTheBackendWhenItDiesAndStopsItOnClose() throws Exception {
        launching(Map.of());
        long first = pid(plugin.handle(ForwardingTest.request("get-icon", null)));

        plugin.handle(ForwardingTest.request("die", "{}"));
        ProcessHandle.of(first).ifPresent(p -> p.onExit().join());
        GoPluginApiResponse again = plugin.handle(ForwardingTest.request("get-icon", null));

        assertEquals(200, again.responseCode(), again.responseBody());
        long second = pid(again);
        assertNotEquals(first, second);

        plugin.close();
        ProcessHandle.of(second).ifPresent(p -> p.onExit().orTimeout(10, java.util.concurrent.TimeUnit.SECONDS).join());
        assertFalse(ProcessHandle.of(second).map(ProcessHandle::isAlive).orElse(false));
    }

    @Test
    void runtimeRequestsDoNotWaitLongerThanTheirTimeoutForAStartingBackend() {
        launching(Map.of("gocd.reuse.timeout.should-assign-work.ms", "100"));
        // FakeBackendMain needs a JVM start plus 300 ms before /healthz says 200.
        long start = System.nanoTime();
        GoPluginApiResponse response = plugin.handle(ForwardingTest.request("should-assign-work", "{}"));
        long took = Duration.ofNanos(System.nanoTime() - start).toMillis();
        assertEquals(503, response.responseCode());
        assertTrue(response.responseBody().contains("not ready"), response.responseBody());
        assertTrue(response.responseBody().contains("gocd.reuse.backend.command"), response.responseBody());
        assertTrue(took < 1_000, "took " + took + " ms");
    }

    @Test
    void aChildThatExitsAtOnceFailsTheLoadTimeWaitAtOnceWithItsExitCodeAndOutput(@TempDir Path dir) {
        for (Path log : new Path[] {null, dir.resolve("backend.log")}) {
            Map<String, String> properties = new java.util.HashMap<>(Map.of(
                    "gocd.reuse.backend.command", fakeBackendCommand("crash"),
                    "gocd.reuse.backend.startup-wait.ms", "30000"));
            if (log != null) {
                properties.put("gocd.reuse.backend.log", log.toString());
            }
            plugin = new KubernetesReuseElasticAgentPlugin(() -> BridgeSettings.of(properties));

            long start = System.nanoTime();
            GoPluginApiResponse response = plugin.handle(ForwardingTest.request("get-capabilities", null));
            long took = Duration.ofNanos(System.nanoTime() - start).toMillis();

            String body = response.responseBody();
            assertEquals(503, response.responseCode(), body);
            assertTrue(body.contains("exited with code 4 during start-up"), body);
            assertTrue(body.contains("No module named 'flask'"), "output " + (log == null ? "drained" : "to a file")
                    + ": " + body);
            // A JVM start, not the 30 s wait.
            assertTrue(took < 10_000, "took " + took + " ms");
            plugin.close();
        }
    }

    @Test
    void aCommandThatCannotStartIsReportedNotThrown() {
        plugin = new KubernetesReuseElasticAgentPlugin(() -> BridgeSettings.of(Map.of(
                "gocd.reuse.backend.command", "/nonexistent/python3 -m elastic_agent serve",
                "gocd.reuse.backend.startup-wait.ms", "300")));
        GoPluginApiResponse response = plugin.handle(ForwardingTest.request("get-icon", null));
        assertEquals(503, response.responseCode());
        assertTrue(response.responseBody().contains("/nonexistent/python3"), response.responseBody());
    }
}
