package org.gocd.contrib.reuse.bridge;

import com.thoughtworks.go.plugin.api.request.GoApiRequest;
import com.thoughtworks.go.plugin.api.response.GoPluginApiResponse;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The real thing minus GoCD and Kubernetes: the plugin class launching the Python backend (command mode,
 * exactly as an administrator would configure it) against the project's fake Kubernetes API server, with
 * a recording accessor standing in for the GoCD server.
 */
final class PythonStack implements AutoCloseable {
    static final String GO_SERVER_URL = "https://gocd.example.com/go";
    static final String IMAGE = "gocd/gocd-agent-alpine-3.19:v24.1.0";

    final Path repoRoot;
    final String kubeUrl;
    final KubernetesReuseElasticAgentPlugin plugin;
    final RecordingAccessor accessor;
    /** What list-agents answers; tests set it to agents GoCD would know. */
    volatile String registeredAgents = "[]";
    private final Process fakeKube;
    private final Path log;
    private final HttpClient http = HttpClient.newHttpClient();

    /** Skips the calling test (by assumption) when the Python side cannot run here; fails instead under CI. */
    static Path repoRootOrSkip() throws Exception {
        Path root = Path.of(System.getProperty("bridge.repo.root", "..")).toAbsolutePath().normalize();
        Process probe = new ProcessBuilder("python3", "-c", "import elastic_agent.simulation.fake_kube, elastic_agent.cli")
                .directory(root.toFile()).redirectErrorStream(true).start();
        String output = new String(probe.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        boolean ok = probe.waitFor() == 0;
        if (!ok) {
            System.out.println("SKIPPED end-to-end: the Python backend is not importable from " + root + ":\n" + output);
        }
        // In CI the backend must be there: a skipped end-to-end test would hide a broken set-up.
        if (!ok && "true".equals(System.getenv("CI"))) {
            throw new AssertionError("CI=true but python3 cannot import the backend from " + root + ":\n" + output);
        }
        assumeTrue(ok, "python3 cannot import elastic_agent.simulation.fake_kube / elastic_agent.cli in " + root);
        return root;
    }

    PythonStack(Path repoRoot, String backendLogName) throws Exception {
        this.repoRoot = repoRoot;
        fakeKube = new ProcessBuilder("python3", "-m", "elastic_agent.simulation.fake_kube", "--bind", "127.0.0.1:0")
                .directory(repoRoot.toFile()).redirectErrorStream(true).start();
        kubeUrl = readListeningUrl(fakeKube);
        accessor = new RecordingAccessor(this::gocd);
        log = Path.of("target", backendLogName).toAbsolutePath();
        Files.deleteIfExists(log);
        Map<String, String> properties = Map.of(
                "gocd.reuse.backend.command", "python3 -m elastic_agent serve",
                "gocd.reuse.backend.workdir", repoRoot.toString(),
                "gocd.reuse.backend.log", log.toString(),
                "gocd.reuse.backend.startup-wait.ms", "60000");
        plugin = new KubernetesReuseElasticAgentPlugin(() -> BridgeSettings.of(properties));
        plugin.initializeGoApplicationAccessor(accessor);
    }

    private com.thoughtworks.go.plugin.api.response.GoApiResponse gocd(GoApiRequest request) {
        if (request.api().equals("go.processor.elastic-agents.list-agents")) {
            return RecordingAccessor.ok(registeredAgents);
        }
        return RecordingAccessor.gocdLike(request);
    }

    private static String readListeningUrl(Process process) throws Exception {
        BufferedReader reader = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        CompletableFuture<String> url = CompletableFuture.supplyAsync(() -> {
            StringBuilder seen = new StringBuilder();
            Pattern listening = Pattern.compile("listening on (http://\\S+)");
            try {
                String line;
                while ((line = reader.readLine()) != null) {
                    seen.append(line).append('\n');
                    Matcher m = listening.matcher(line);
                    if (m.find()) {
                        return m.group(1);
                    }
                }
            } catch (IOException e) {
                // fall through
            }
            throw new IllegalStateException("fake_kube ended without a 'listening on' line:\n" + seen);
        });
        String found = url.get(30, TimeUnit.SECONDS);
        // Keep draining so the fake API never blocks on a full pipe.
        DaemonThreads.start("fake-kube-output", () -> {
            try {
                while (reader.readLine() != null) {
                    // discard
                }
            } catch (IOException e) {
                // gone
            }
        });
        return found.endsWith("/") ? found.substring(0, found.length() - 1) : found;
    }

    String clusterProfile() {
        return "{\"go_server_url\":\"" + GO_SERVER_URL + "\",\"kubernetes_cluster_url\":\"" + kubeUrl
                + "\",\"namespace\":\"default\",\"security_token\":\"t\"}";
    }

    static String elasticProfile() {
        return "{\"Image\":\"" + IMAGE + "\",\"PodSpecType\":\"properties\"}";
    }

    static String job(long jobId, String jobName) {
        return "{\"pipeline_name\":\"build\",\"pipeline_label\":\"7\",\"pipeline_counter\":7,"
                + "\"stage_name\":\"compile\",\"stage_counter\":\"1\",\"job_name\":\"" + jobName
                + "\",\"job_id\":" + jobId + "}";
    }

    GoPluginApiResponse createAgent(long jobId, String jobName) {
        return plugin.handle(ForwardingTest.request("create-agent", "{\"auto_register_key\":\"key-" + jobId
                + "\",\"elastic_agent_profile_properties\":" + elasticProfile()
                + ",\"cluster_profile_properties\":" + clusterProfile()
                + ",\"job_identifier\":" + job(jobId, jobName) + "}"));
    }

    String shouldAssignWorkBody(String agentId, long jobId, String jobName) {
        return "{\"agent\":{\"agent_id\":\"" + agentId + "\",\"agent_state\":\"Idle\",\"build_state\":\"Idle\","
                + "\"config_state\":\"Enabled\"},\"elastic_agent_profile_properties\":" + elasticProfile()
                + ",\"cluster_profile_properties\":" + clusterProfile()
                + ",\"job_identifier\":" + job(jobId, jobName) + "}";
    }

    GoPluginApiResponse shouldAssignWork(String agentId, long jobId, String jobName) {
        return plugin.handle(ForwardingTest.request("should-assign-work", shouldAssignWorkBody(agentId, jobId, jobName)));
    }

    GoPluginApiResponse serverPing() {
        return plugin.handle(ForwardingTest.request("server-ping",
                "{\"all_cluster_profile_properties\":[" + clusterProfile() + "]}"));
    }

    /** Pod names in the fake cluster's default namespace, straight from its REST API. */
    @SuppressWarnings("unchecked")
    List<String> podNames() throws Exception {
        HttpResponse<String> response = http.send(HttpRequest.newBuilder(
                URI.create(kubeUrl + "/api/v1/namespaces/default/pods")).GET().build(),
                HttpResponse.BodyHandlers.ofString());
        if (response.statusCode() != 200) {
            throw new IllegalStateException("fake API answered " + response.statusCode() + ": " + response.body());
        }
        List<String> names = new ArrayList<>();
        for (Object item : (List<Object>) MiniJson.path(MiniJson.parse(response.body()), "items")) {
            names.add((String) MiniJson.path(item, "metadata", "name"));
        }
        return names;
    }

    /** The last lines of the backend's own log, for failure messages. */
    String backendLogTail() {
        try {
            List<String> lines = Files.readAllLines(log);
            return String.join("\n", lines.subList(Math.max(0, lines.size() - 40), lines.size()));
        } catch (IOException e) {
            return "(no backend log at " + log + ")";
        }
    }

    @Override
    public void close() {
        plugin.close();
        fakeKube.destroy();
        try {
            if (!fakeKube.waitFor(5, TimeUnit.SECONDS)) {
                fakeKube.destroyForcibly();
            }
        } catch (InterruptedException e) {
            fakeKube.destroyForcibly();
            Thread.currentThread().interrupt();
        }
    }
}
