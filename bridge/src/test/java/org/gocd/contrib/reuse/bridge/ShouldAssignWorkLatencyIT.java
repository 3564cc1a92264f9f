package org.gocd.contrib.reuse.bridge;

import com.thoughtworks.go.plugin.api.response.GoPluginApiResponse;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Round-trip latency of should-assign-work through the plugin class, the HTTP hop and the real Python
 * backend (which answers from memory). GoCD asks this inside its global assignment lock, so it matters.
 *
 * <p>Every build runs a short version (200 calls: the answers are checked, the figures printed); the
 * full measurement of 2,000 calls after 500 warm-up runs with:
 * {@code mvn -B verify -Dbridge.latency=true -Dit.test=ShouldAssignWorkLatencyIT -Dtest=none
 * -Dsurefire.failIfNoSpecifiedTests=false}; optional {@code -Dbridge.latency.calls=N}
 * and {@code -Dbridge.latency.warmup=N}. Prints p50/p99 and writes target/latency.txt. Nothing is
 * asserted about the times: they depend on the machine.
 */
@Timeout(600)
class ShouldAssignWorkLatencyIT {
    private static final boolean FULL = Boolean.getBoolean("bridge.latency");

    @Test
    void measure() throws Exception {
        int calls = Integer.getInteger("bridge.latency.calls", FULL ? 2_000 : 200);
        int warmup = Integer.getInteger("bridge.latency.warmup", FULL ? 500 : 50);
        try (PythonStack stack = PythonStack.startOrSkip("latency-backend.log")) {
            assertEquals(200, stack.plugin.handle(ForwardingTest.request("get-capabilities", null)).responseCode());
            assertEquals(200, stack.createAgent(301, "unit").responseCode());
            List<String> pods = stack.podNames();
            for (int i = 0; i < 300 && pods.isEmpty(); i++) {
                Thread.sleep(100);
                pods = stack.podNames();
            }
            String pod = pods.get(0);
            // A job this pod may not take: the answer is "false" and changes nothing, so every call does
            // the same work (the realistic case: agents poll far more often than they get a job).
            String body = stack.shouldAssignWorkBody(pod, 302, "lint");
            for (int i = 0; i < warmup; i++) {
                stack.plugin.handle(ForwardingTest.request("should-assign-work", body));
            }
            long[] nanos = new long[calls];
            for (int i = 0; i < calls; i++) {
                long start = System.nanoTime();
                GoPluginApiResponse response = stack.plugin.handle(ForwardingTest.request("should-assign-work", body));
                nanos[i] = System.nanoTime() - start;
                assertEquals(200, response.responseCode(), response.responseBody());
                assertEquals("false", response.responseBody().trim());
            }
            Arrays.sort(nanos);
            String report = String.format(Locale.ROOT,
                    "should-assign-work round trip (plugin class -> HTTP -> Python backend), %d calls after %d warm-up: "
                            + "p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms",
                    calls, warmup, ms(nanos, 0.50), ms(nanos, 0.90), ms(nanos, 0.99), nanos[calls - 1] / 1e6);
            System.out.println(report);
            Files.writeString(Path.of("target", "latency.txt"), report + "\n");
        }
    }

    /** The bridge's own share: the same calls against an in-JVM stub that answers at once. */
    @Test
    void bridgeAloneAgainstAStub() throws Exception {
        int calls = Integer.getInteger("bridge.latency.calls", FULL ? 2_000 : 200);
        int warmup = Integer.getInteger("bridge.latency.warmup", FULL ? 500 : 50);
        try (FakeBackend stub = new FakeBackend().answering(r -> FakeBackend.Reply.of(200, "false"))) {
            java.util.Map<String, String> properties = java.util.Map.of(
                    "gocd.reuse.backend.url", stub.url(), "gocd.reuse.token", "t");
            KubernetesReuseElasticAgentPlugin plugin =
                    new KubernetesReuseElasticAgentPlugin(() -> BridgeSettings.of(properties));
            try {
                String body = "{\"agent\":{\"agent_id\":\"pod\"},\"job_identifier\":{\"job_id\":1}}";
                for (int i = 0; i < warmup; i++) {
                    plugin.handle(ForwardingTest.request("should-assign-work", body));
                }
                long[] nanos = new long[calls];
                for (int i = 0; i < calls; i++) {
                    long start = System.nanoTime();
                    plugin.handle(ForwardingTest.request("should-assign-work", body));
                    nanos[i] = System.nanoTime() - start;
                }
                Arrays.sort(nanos);
                String report = String.format(Locale.ROOT,
                        "should-assign-work through the bridge alone (plugin class -> HTTP -> in-JVM stub), %d calls: "
                                + "p50 %.2f ms, p99 %.2f ms", calls, ms(nanos, 0.50), ms(nanos, 0.99));
                System.out.println(report);
                Files.writeString(Path.of("target", "latency-bridge-only.txt"), report + "\n");
            } finally {
                plugin.close();
            }
        }
    }

    private static double ms(long[] sorted, double quantile) {
        int index = (int) Math.ceil(quantile * sorted.length) - 1;
        return sorted[Math.max(0, index)] / 1e6;
    }
}
