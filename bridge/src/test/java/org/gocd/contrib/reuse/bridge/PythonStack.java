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

import static org.junit.jupiter.api.Assumptions.abort;

/**
 * The real thing minus GoCD and Kubernetes: the plugin class launching the Python backend (command mode,
 * exactly as an administrator would configure it) against the project's fake Kubernetes API server, with
 * a recording accessor standing in for the GoCD server.
 */
final class PythonStack implements AutoCloseable {
    static final String GO_SERVER_URL = "https://gocd.example.com/go";
    static final String IMAGE = "gocd/gocd-agent-alpine-3.19:v24.1.0";

    /** Names the Python to run the backend with; otherwise the repository's .venv, otherwise python3. */
    static final String PYTHON_PROPERTY = "bridge.e2e.python";
    /** The backend's runtime dependencies plus the two modules this test runs (and nothing else of ours). */
    private static final String PROBE = "import flask, waitress, kubernetes, yaml, prometheus_client, jinja2, "
            + "urllib3, elastic_agent, elastic_agent.simulation.fake_kube";
    /** The probe takes under 2 s; a Python that hangs must not hang the build. */
    private static final long PROBE_TIMEOUT_SECONDS = 30;

    final Path repoRoot;
    final String kubeUrl;
    final KubernetesReuseElasticAgentPlugin plugin;
    final RecordingAccessor accessor;
    /** What list-agents answers; tests set it to agents GoCD would know. */
    volatile String registeredAgents = "[]";
    private final Process fakeKube;
    private final Path log;
    private final HttpClient http = HttpClient.newHttpClient();

    /**
     * Starts the stack, or skips the calling test (by assumption) when the chosen Python cannot run the
     * backend; under CI=true it fails instead, since a skipped end-to-end test would hide a broken set-up.
     */
    static PythonStack startOrSkip(String backendLogName) throws Exception {
        Path root = repoRoot();
        return new PythonStack(root, pythonOrSkip(root), backendLogName);
    }

    /** The repository root (failsafe passes it as bridge.repo.root). */
    static Path repoRoot() {
        return Path.of(System.getProperty("bridge.repo.root", "..")).toAbsolutePath().normalize();
    }

    /**
     * The Python that runs the backend (see {@link #PYTHON_PROPERTY}), after checking it imports what the
     * backend needs; otherwise skips the calling test by assumption, or fails it under CI=true, since a
     * skipped end-to-end test would hide a broken set-up.
     */
    static String pythonOrSkip(Path root) throws Exception {
        String python = python(root);
        String problem = probe(root, python);
        if (problem != null) {
            String reason = "end-to-end test needs the backend's dependencies, but " + problem
                    + "\nRun `bash scripts/setup.sh` in " + root + " (it fills .venv, which this test then uses),"
                    + " or pass -D" + PYTHON_PROPERTY + "=/path/to/python of an environment that has them.";
            if ("true".equals(System.getenv("CI"))) {
                throw new AssertionError("CI=true: " + reason);
            }
            System.out.println("SKIPPED " + reason);
            abort(reason);
        }
        return python;
    }

    private static String python(Path root) {
        String configured = System.getProperty(PYTHON_PROPERTY, "").trim();
        if (!configured.isEmpty()) {
            return configured;
        }
        Path venv = root.resolve(".venv/bin/python");
        return Files.isExecutable(venv) ? venv.toString() : "python3";
    }

    /** Null when {@code python} imports everything the backend needs in {@code root}; else what went wrong. */
    private static String probe(Path root, String python) throws Exception {
        Path output = Files.createTempFile("bridge-e2e-probe", ".txt");
        try {
            // Output to a file, not a pipe: nothing to drain while waiting with a timeout.
            Process probe = new ProcessBuilder(python, "-c", PROBE).directory(root.toFile())
                    .redirectErrorStream(true).redirectOutput(output.toFile()).start();
            if (!probe.waitFor(PROBE_TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
                probe.destroyForcibly();
                return python + " -c '" + PROBE + "' did not finish within " + PROBE_TIMEOUT_SECONDS + " s.";
            }
            if (probe.exitValue() == 0) {
                return null;
            }
            return python + " -c '" + PROBE + "' failed in " + root + " (exit code " + probe.exitValue() + "):\n"
                    + Files.readString(output).strip();
        } catch (IOException e) {
            return python + " cannot be started: " + e.getMessage();
        } finally {
            Files.deleteIfExists(output);
        }
    }

    private PythonStack(Path repoRoot, String python, String backendLogName) throws Exception {
        this.repoRoot = repoRoot;
        fakeKube = new ProcessBuilder(python, "-m", "elastic_agent.simulation.fake_kube", "--bind", "127.0.0.1:0")
                .directory(repoRoot.toFile()).redirectErrorStream(true).start();
        kubeUrl = readListeningUrl(fakeKube);
        accessor = new RecordingAccessor(this::gocd);
        log = Path.of("target", backendLogName).toAbsolutePath();
        Files.deleteIfExists(log);
        Map<String, String> properties = Map.of(
                "gocd.reuse.backend.command", BackendProcessTest.quote(python) + " -m elastic_agent serve",
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
        return readListeningUrl(process, null);
    }

    /**
     * Waits (at most 30 s, normally about a second) for the process's "listening on http://..." line and
     * returns that URL without a trailing slash; then keeps reading its output so it never blocks on a
     * full pipe, appending every line to {@code copyTo} when that is not null. Fails at once, with the
     * output, when the process ends first.
     */
    static String readListeningUrl(Process process, Path copyTo) throws Exception {
        BufferedReader reader = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        java.util.function.Consumer<String> copy = line -> {
            if (copyTo != null) {
                try {
                    Files.writeString(copyTo, line + "\n", StandardCharsets.UTF_8,
                            java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.APPEND);
                } catch (IOException e) {
                    // the copy is for diagnosis only
                }
            }
        };
        CompletableFuture<String> url = CompletableFuture.supplyAsync(() -> {
            StringBuilder seen = new StringBuilder();
            Pattern listening = Pattern.compile("listening on (http://\\S+)");
            try {
                String line;
                while ((line = reader.readLine()) != null) {
                    copy.accept(line);
                    seen.append(line).append('\n');
                    Matcher m = listening.matcher(line);
                    if (m.find()) {
                        return m.group(1);
                    }
                }
            } catch (IOException e) {
                // fall through
            }
            throw new IllegalStateException("the process ended without a 'listening on' line:\n" + seen);
        });
        String found = url.get(30, TimeUnit.SECONDS);
        // Keep draining so the fake API never blocks on a full pipe.
        DaemonThreads.start("process-output", () -> {
            try {
                String line;
                while ((line = reader.readLine()) != null) {
                    copy.accept(line);
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
