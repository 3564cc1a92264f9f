package org.gocd.contrib.reuse.bridge;

import com.thoughtworks.go.plugin.api.request.GoApiRequest;
import com.thoughtworks.go.plugin.api.response.GoPluginApiResponse;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The Kubernetes wiring (issue 13): the backend runs as a sidecar container of the GoCD server's pod, not
 * as a child of the jar. Here the "sidecar" is the real backend started by the test as a separate process,
 * exactly as the sidecar container runs it ({@code python -m elastic_agent serve --bind 127.0.0.1:PORT
 * --token-file FILE}, no token or callback URL in its environment); the token is a file laid out as kubelet
 * mounts a Secret, read by both sides; and the plugin class gets only the server container's two
 * environment variables, {@code GOCD_REUSE_BACKEND_URL} and {@code GOCD_REUSE_TOKEN_FILE} (no launch
 * command, no system property). A recording accessor stands in for the GoCD server.
 *
 * <p>Nothing waits for a fixed time: each step waits for an event (the "listening on" line, the process's
 * exit) with a generous upper bound.
 */
@Timeout(120)
class SidecarIT {
    private static final String PING = "{\"all_cluster_profile_properties\":[]}";
    private static final String LIST_AGENTS = "go.processor.elastic-agents.list-agents";

    private final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

    @Test
    void theJarTalksToASidecarItDidNotStart(@TempDir Path dir) throws Exception {
        Path root = PythonStack.repoRoot();
        String python = PythonStack.pythonOrSkip(root);
        Path log = Path.of("target", "sidecar-backend.log").toAbsolutePath();
        Files.deleteIfExists(log);
        Secret secret = new Secret(dir.resolve("gocd-reuse"));
        String token = Secrets.newToken();
        secret.write(token + "\n");  // `kubectl create secret --from-file` of a file ending with a newline

        Sidecar sidecar = Sidecar.start(python, root, secret.file(), 0, log);
        Map<String, String> serverContainerEnv = Map.of(
                "GOCD_REUSE_BACKEND_URL", sidecar.url,
                "GOCD_REUSE_TOKEN_FILE", secret.file().toString());
        BridgeSettings settings = BridgeSettings.from(name -> null, serverContainerEnv);
        assertFalse(settings.launchesBackend(), "no launch command");
        assertNull(settings.token, "no token in the server's environment: only the file");
        RecordingAccessor accessor = new RecordingAccessor();
        KubernetesReuseElasticAgentPlugin plugin =
                new KubernetesReuseElasticAgentPlugin(() -> BridgeSettings.from(name -> null, serverContainerEnv));
        plugin.initializeGoApplicationAccessor(accessor);
        try {
            run(plugin, accessor, sidecar, secret, token, python, root, log);
        } catch (AssertionError | RuntimeException e) {
            throw new AssertionError(e.getMessage() + "\n--- sidecar log ---\n" + tail(log), e);
        } finally {
            plugin.close();
            sidecar.close();
        }
    }

    private void run(KubernetesReuseElasticAgentPlugin plugin, RecordingAccessor accessor, Sidecar first,
                     Secret secret, String token, String python, Path root, Path log) throws Exception {
        // get-capabilities: 200 and the backend's JSON, byte for byte as the backend answers it directly.
        GoPluginApiResponse capabilities = plugin.handle(ForwardingTest.request("get-capabilities", null));
        assertEquals(200, capabilities.responseCode(), capabilities.responseBody());
        HttpResponse<String> direct = post(first.url, "cd.go.elastic-agent.get-capabilities", token);
        assertEquals(200, direct.statusCode());
        assertEquals(direct.body(), capabilities.responseBody());
        assertEquals(Boolean.TRUE, MiniJson.path(MiniJson.parse(capabilities.responseBody()),
                "supports_agent_status_report"), capabilities.responseBody());

        // The callback endpoint is on loopback (the pod's, shared by both containers) ...
        String callbackUrl = plugin.bridge().callbackUrl();
        assertTrue(callbackUrl.matches("http://127\\.0\\.0\\.1:\\d+"), callbackUrl);
        // ... and the backend, which has no callback URL of its own, finds it in X-GoCD-Callback-URL.
        int listCalls = count(accessor, LIST_AGENTS);
        GoPluginApiResponse ping = plugin.handle(ForwardingTest.request("server-ping", PING));
        assertEquals(200, ping.responseCode(), ping.responseBody());
        assertEquals(listCalls + 1, count(accessor, LIST_AGENTS),
                "server-ping made the backend call list-agents back through the jar: " + accessor.apiNames());
        GoApiRequest call = last(accessor, LIST_AGENTS);
        assertEquals("elastic-agent", call.pluginIdentifier().getExtension());

        // The Secret is rotated: kubelet swaps the files of the one volume both containers mount, and both
        // read it again (the jar at every request, the backend when the file changed). The next request is
        // accepted with the new token, without restarting anything; the old token is refused from then on.
        String rotated = Secrets.newToken();
        secret.write(rotated + "\n");
        GoPluginApiResponse afterRotation = plugin.handle(ForwardingTest.request("server-ping", PING));
        assertEquals(200, afterRotation.responseCode(), afterRotation.responseBody());
        assertEquals(listCalls + 2, count(accessor, LIST_AGENTS), "the callback carried the new token too");
        HttpResponse<String> old = post(first.url, "cd.go.elastic-agent.server-ping", token);
        assertEquals(401, old.statusCode());
        assertTrue(old.body().contains("wrong token"), old.body());
        assertEquals(listCalls + 2, count(accessor, LIST_AGENTS), "a refused request does nothing");

        // The sidecar stops (SIGTERM, as Kubernetes stops a container): it exits cleanly, and a request
        // gets the bridge's 503 sentence at once.
        int port = URI.create(first.url).getPort();
        assertEquals(0, first.terminate(), "the backend handles SIGTERM and exits 0");
        long start = System.nanoTime();
        GoPluginApiResponse down = plugin.handle(ForwardingTest.request("server-ping", PING));
        long tookMillis = (System.nanoTime() - start) / 1_000_000;
        assertEquals(503, down.responseCode(), down.responseBody());
        assertTrue(down.responseBody().startsWith("The kubernetes-reuse elastic agent backend at " + first.url
                + " could not be reached for cd.go.elastic-agent.server-ping ("), down.responseBody());
        assertTrue(down.responseBody().contains("Start the backend (python3 -m elastic_agent serve --bind HOST:PORT"),
                down.responseBody());
        assertTrue(down.responseBody().contains("gocd.reuse.backend.url"), down.responseBody());
        assertFalse(down.responseBody().contains(rotated), "the token is never in an answer");
        assertTrue(tookMillis < 2_000, "a stopped sidecar is reported at once, took " + tookMillis + " ms");
        assertEquals(listCalls + 2, count(accessor, LIST_AGENTS));

        // A load-time request while it is down waits (gocd.reuse.backend.startup-wait.ms) instead of failing.
        // Its own thread: the common pool may be small, and Sidecar.start needs one to read the output.
        CompletableFuture<GoPluginApiResponse> icon = new CompletableFuture<>();
        DaemonThreads.start("load-time-request",
                () -> icon.complete(plugin.handle(ForwardingTest.request("get-icon", null))));

        // Kubernetes restarts the sidecar on its own, on the same address: the same plugin instance works
        // again, no restart of the plugin or the server.
        assertFalse(icon.isDone(), "a load-time request does not fail while the backend is down");
        try (Sidecar second = Sidecar.start(python, root, secret.file(), port, log)) {
            assertEquals(first.url, second.url);
            GoPluginApiResponse again = plugin.handle(ForwardingTest.request("server-ping", PING));
            assertEquals(200, again.responseCode(), again.responseBody());
            assertEquals(listCalls + 3, count(accessor, LIST_AGENTS),
                    "the restarted backend calls back through the same endpoint: " + accessor.apiNames());
            assertEquals(callbackUrl, plugin.bridge().callbackUrl(), "the same bridge, not a new one");
            GoPluginApiResponse waited = icon.get(30, TimeUnit.SECONDS);
            assertEquals(200, waited.responseCode(), waited.responseBody());
            GoPluginApiResponse capabilitiesAgain = plugin.handle(ForwardingTest.request("get-capabilities", null));
            assertEquals(200, capabilitiesAgain.responseCode(), capabilitiesAgain.responseBody());
            assertEquals(capabilities.responseBody(), capabilitiesAgain.responseBody());
        }
    }

    private HttpResponse<String> post(String url, String request, String token) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create(url + "/gocd/plugin/" + request))
                        .header("Authorization", "Bearer " + token)
                        .header("Content-Type", "application/json")
                        .POST(HttpRequest.BodyPublishers.ofString(request.endsWith("server-ping") ? PING : ""))
                        .build(),
                HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
    }

    private static int count(RecordingAccessor accessor, String api) {
        return (int) accessor.apiNames().stream().filter(api::equals).count();
    }

    private static GoApiRequest last(RecordingAccessor accessor, String api) {
        List<GoApiRequest> calls = accessor.calls.stream().filter(c -> c.api().equals(api)).toList();
        return calls.get(calls.size() - 1);
    }

    private static String tail(Path log) {
        try {
            List<String> lines = Files.readAllLines(log);
            return String.join("\n", lines.subList(Math.max(0, lines.size() - 40), lines.size()));
        } catch (Exception e) {
            return "(no sidecar log at " + log + ")";
        }
    }

    /**
     * A Secret mounted as a volume, laid out as kubelet does: {@code token -> ..data/token}, {@code ..data ->
     * ..<version>}; an update writes a new version directory and swaps {@code ..data} atomically.
     */
    private record Secret(Path mount) {
        Path file() {
            return mount.resolve("token");
        }

        void write(String content) throws Exception {
            Files.createDirectories(mount);
            Path version = Files.createTempDirectory(mount, "..version_");
            Files.writeString(version.resolve("token"), content, StandardCharsets.UTF_8);
            Path swap = mount.resolve("..data_tmp");
            Files.deleteIfExists(swap);
            Files.createSymbolicLink(swap, version.getFileName());
            Files.move(swap, mount.resolve("..data"), StandardCopyOption.ATOMIC_MOVE,
                    StandardCopyOption.REPLACE_EXISTING);
            if (!Files.isSymbolicLink(file())) {
                Files.createSymbolicLink(file(), Path.of("..data", "token"));
            }
        }
    }

    /** The sidecar container: the real backend as a separate process, with its token from the file only. */
    private static final class Sidecar implements AutoCloseable {
        final Process process;
        final String url;

        private Sidecar(Process process, String url) {
            this.process = process;
            this.url = url;
        }

        static Sidecar start(String python, Path root, Path tokenFile, int port, Path log) throws Exception {
            ProcessBuilder builder = new ProcessBuilder(python, "-m", "elastic_agent", "serve",
                    "--bind", "127.0.0.1:" + port, "--token-file", tokenFile.toString())
                    .directory(root.toFile()).redirectErrorStream(true);
            builder.environment().remove(BridgeSettings.TOKEN_ENV);
            builder.environment().remove("GOCD_ELASTIC_AGENT_CALLBACK_URL");
            Process process = builder.start();
            try {
                return new Sidecar(process, PythonStack.readListeningUrl(process, log));
            } catch (Exception | AssertionError e) {
                process.destroyForcibly();
                throw e;
            }
        }

        /**
         * SIGTERM, as the kubelet sends it; returns the exit code once the process has ended. Sent through
         * the ProcessHandle: Process.destroy() sends SIGTERM too but also closes our end of the process's
         * output pipe, so its shutdown lines would be lost (and a write to the pipe would fail).
         */
        int terminate() throws InterruptedException {
            process.toHandle().destroy();
            if (!process.waitFor(20, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                throw new AssertionError("the backend did not exit within 20 s of SIGTERM");
            }
            return process.exitValue();
        }

        @Override
        public void close() throws InterruptedException {
            if (process.isAlive()) {
                process.toHandle().destroy();
                if (!process.waitFor(15, TimeUnit.SECONDS)) {
                    process.destroyForcibly();
                }
            }
        }
    }
}
