package org.gocd.contrib.reuse.bridge;

import com.thoughtworks.go.plugin.api.response.GoPluginApiResponse;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * GoPlugin.handle() → the bridge launching the real Python backend → the fake Kubernetes API, and the
 * backend's calls back through the callback endpoint to the (recording) GoCD server.
 */
@Timeout(180)
class EndToEndIT {
    @Test
    void createAssignAndPingThroughTheRealBackend() throws Exception {
        try (PythonStack stack = PythonStack.startOrSkip("e2e-backend.log")) {
            try {
                run(stack);
            } catch (AssertionError | RuntimeException e) {
                throw new AssertionError(e.getMessage() + "\n--- backend log ---\n" + stack.backendLogTail(), e);
            }
        }
    }

    private static void run(PythonStack stack) throws Exception {
        // Load-time request: waits for the launched backend to become healthy.
        GoPluginApiResponse capabilities = stack.plugin.handle(ForwardingTest.request("get-capabilities", null));
        assertEquals(200, capabilities.responseCode(), capabilities.responseBody());
        assertTrue(capabilities.responseBody().contains("supports_agent_status_report"), capabilities.responseBody());
        // The real backend said its version back through the jar: the jar's own (one build, one version).
        VersionCheck versions = stack.plugin.bridge().versions();
        assertEquals(System.getProperty("bridge.plugin.version"), versions.backendVersion());
        assertEquals(versions.bridgeVersion(), versions.backendVersion());
        assertNull(versions.problem(), versions.problem());

        GoPluginApiResponse created = stack.createAgent(101, "unit");
        assertEquals(200, created.responseCode(), created.responseBody());

        List<String> pods = waitForPods(stack);
        assertEquals(1, pods.size(), "one pod for one job: " + pods);
        String pod = pods.get(0);
        assertTrue(stack.accessor.apiNames().contains("go.processor.server-info.get"),
                "the backend asked GoCD who it is: " + stack.accessor.apiNames());

        GoPluginApiResponse otherJob = stack.shouldAssignWork(pod, 202, "lint");
        assertEquals(200, otherJob.responseCode(), otherJob.responseBody());
        assertEquals("false", otherJob.responseBody().trim());

        GoPluginApiResponse ownJob = stack.shouldAssignWork(pod, 101, "unit");
        assertEquals(200, ownJob.responseCode(), ownJob.responseBody());
        assertEquals("true", ownJob.responseBody().trim());

        GoPluginApiResponse afterwards = stack.shouldAssignWork(pod, 202, "lint");
        assertEquals("false", afterwards.responseBody().trim(), "a busy pod takes no second job");

        stack.registeredAgents = "[{\"agent_id\":\"" + pod + "\",\"agent_state\":\"Building\","
                + "\"build_state\":\"Building\",\"config_state\":\"Enabled\"}]";
        int before = count(stack, "go.processor.elastic-agents.list-agents");
        GoPluginApiResponse ping = stack.serverPing();
        assertEquals(200, ping.responseCode(), ping.responseBody());
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (count(stack, "go.processor.elastic-agents.list-agents") <= before && System.nanoTime() < deadline) {
            Thread.sleep(100);
        }
        assertTrue(count(stack, "go.processor.elastic-agents.list-agents") > before,
                "server-ping made the backend call list-agents: " + stack.accessor.apiNames());
        assertTrue(stack.podNames().contains(pod), "a busy pod survives a ping");
        assertFalse(stack.accessor.apiNames().contains("go.processor.elastic-agents.delete-agents"),
                "nothing deleted: " + stack.accessor.apiNames());
    }

    private static List<String> waitForPods(PythonStack stack) throws Exception {
        long deadline = System.nanoTime() + 30_000_000_000L;
        List<String> pods = stack.podNames();
        while (pods.isEmpty() && System.nanoTime() < deadline) {
            Thread.sleep(100);
            pods = stack.podNames();
        }
        assertFalse(pods.isEmpty(), "create-agent made a pod in the fake cluster");
        return pods;
    }

    private static int count(PythonStack stack, String api) {
        return (int) stack.accessor.apiNames().stream().filter(api::equals).count();
    }
}
