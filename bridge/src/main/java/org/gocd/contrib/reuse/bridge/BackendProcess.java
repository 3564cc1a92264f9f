package org.gocd.contrib.reuse.bridge;

import com.thoughtworks.go.plugin.api.logging.Logger;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.RandomAccessFile;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Runs the backend as a child process of the GoCD server and keeps it running.
 *
 * <p>Why a supervisor: with {@code gocd.reuse.backend.command} an administrator installs one jar and
 * GoCD's lifecycle becomes the backend's. The supervisor generates a fresh random token per JVM (passed in
 * the child's environment, never on its command line, where {@code ps} would show it), appends
 * {@code --bind 127.0.0.1:<free port>}, waits for {@code GET /healthz} to answer 200 before it calls the
 * backend ready, restarts the child with exponential backoff when it dies, and destroys it (and its
 * descendants) when the JVM shuts down or the plugin is unloaded.
 *
 * <p>A child that exits before it is healthy (a missing module, a bad option) ends every wait for it at
 * once, with its exit code and last output as the reason: waiting out the startup wait could not help.
 *
 * <p>All its threads are daemon threads. The child's output goes to a file or is drained line by line
 * into the plugin log, so the child can never block on a full pipe.
 */
final class BackendProcess implements Backend {
    private static final Logger LOG = Logger.getLoggerFor(BackendProcess.class);
    private static final Duration HEALTH_POLL = Duration.ofMillis(100);
    private static final Duration FIRST_BACKOFF = Duration.ofSeconds(1);
    /** A child that stayed up this long counts as healthy again: the next failure starts backoff anew. */
    private static final Duration STABLE_RUN = Duration.ofMinutes(1);
    /** How much of the child's last output a failed start reports. */
    private static final int TAIL_LINES = 15;
    private static final int TAIL_BYTES = 4096;

    private final BridgeSettings settings;
    private final String callbackUrl;
    private final String token = Secrets.newToken();
    private final HttpClient healthClient;
    private final Object lock = new Object();

    private volatile URI url;
    private volatile boolean ready;
    private volatile boolean stopping;
    /** The last attempt ended before the child was healthy, and no new child runs yet. Guarded by lock. */
    private boolean startFailed;
    /** Why the last start failed or the child last exited, for the answer GoCD shows; null when fine. */
    private volatile String lastProblem;
    private Process process;
    private Thread watchdog;

    BackendProcess(BridgeSettings settings, String callbackUrl) {
        this.settings = settings;
        this.callbackUrl = callbackUrl;
        this.healthClient = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(Duration.ofSeconds(1))
                .executor(java.util.concurrent.Executors.newCachedThreadPool(new DaemonThreads("health")))
                .build();
        this.url = URI.create("http://127.0.0.1:0");
    }

    /** Starts the watchdog, which starts the child. Returns at once; {@link #awaitReady} waits. */
    void start() {
        synchronized (lock) {
            if (watchdog == null) {
                watchdog = DaemonThreads.start("backend-watchdog", this::superviseForever);
            }
        }
    }

    @Override
    public URI url() {
        return url;
    }

    @Override
    public String token() {
        return token;
    }

    @Override
    public boolean awaitReady(Duration limit) throws InterruptedException {
        long deadline = System.nanoTime() + limit.toNanos();
        synchronized (lock) {
            while (!ready && !stopping && !startFailed) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                TimeUnit.NANOSECONDS.timedWait(lock, left);
            }
            return ready;
        }
    }

    @Override
    public String remedy() {
        return "The plugin starts it with the command '" + String.join(" ", settings.backendCommand)
                + "' (" + BridgeSettings.BACKEND_COMMAND + "); check the plugin log"
                + (settings.backendLog == null ? "" : " and " + settings.backendLog)
                + " for why it does not start, and that the command works in "
                + (settings.backendWorkDir == null ? "the server's working directory" : settings.backendWorkDir)
                + "." + (lastProblem == null ? "" : " Last problem: " + lastProblem);
    }

    /** Stops supervising and ends the child and its descendants. Safe to call more than once. */
    void stop() {
        Process child;
        synchronized (lock) {
            stopping = true;
            ready = false;
            child = process;
            lock.notifyAll();
        }
        if (watchdog != null) {
            watchdog.interrupt();
        }
        if (child != null) {
            destroy(child);
        }
    }

    private void superviseForever() {
        Duration backoff = FIRST_BACKOFF;
        while (!stopping) {
            long startedAt = System.nanoTime();
            try {
                runOnce();
            } catch (InterruptedException e) {
                if (stopping) {
                    return;
                }
                Thread.currentThread().interrupt();
                return;
            } catch (IOException | RuntimeException e) {
                lastProblem = "could not start it: " + e.getClass().getSimpleName() + ": " + e.getMessage() + ".";
                failedToStart();
                LOG.error("Could not start the backend with '" + String.join(" ", settings.backendCommand)
                        + "': " + e.getClass().getSimpleName() + ": " + e.getMessage());
            }
            if (stopping) {
                return;
            }
            if (Duration.ofNanos(System.nanoTime() - startedAt).compareTo(STABLE_RUN) > 0) {
                backoff = FIRST_BACKOFF;
            }
            LOG.warn("The backend stopped; restarting it in " + backoff.toMillis() + " ms.");
            try {
                Thread.sleep(backoff.toMillis());
            } catch (InterruptedException e) {
                return;
            }
            backoff = backoff.multipliedBy(2);
            if (backoff.compareTo(settings.restartBackoffMax) > 0) {
                backoff = settings.restartBackoffMax;
            }
        }
    }

    /** Starts the child, marks it ready once healthy, and returns when it has exited. */
    private void runOnce() throws IOException, InterruptedException {
        int port = freeLoopbackPort();
        List<String> command = new ArrayList<>(settings.backendCommand);
        command.add("--bind");
        command.add("127.0.0.1:" + port);
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        if (settings.backendWorkDir != null) {
            builder.directory(settings.backendWorkDir.toFile());
        }
        Map<String, String> env = builder.environment();
        env.put(BridgeSettings.TOKEN_ENV, token);
        env.put("GOCD_ELASTIC_AGENT_CALLBACK_URL", callbackUrl);
        env.remove(BridgeSettings.environmentName(BridgeSettings.TOKEN_FILE));
        long logStart = 0;
        if (settings.backendLog != null) {
            builder.redirectOutput(ProcessBuilder.Redirect.appendTo(settings.backendLog.toFile()));
            logStart = Files.exists(settings.backendLog) ? Files.size(settings.backendLog) : 0;
        }

        Process child;
        synchronized (lock) {
            if (stopping) {
                return;
            }
            child = builder.start();
            process = child;
            startFailed = false;
            url = URI.create("http://127.0.0.1:" + port);
        }
        LOG.info("Started the backend (pid " + child.pid() + ") on 127.0.0.1:" + port + ".");
        Deque<String> tail = new ArrayDeque<>();
        Thread drain = null;
        if (settings.backendLog == null) {
            drain = drainOutput(child, tail);
        } else {
            child.getInputStream().close();
        }
        try {
            boolean healthy = waitUntilHealthy(child);
            int exit = child.waitFor();
            if (healthy) {
                lastProblem = "it exited with code " + exit + ".";
                LOG.warn("The backend (pid " + child.pid() + ") exited with code " + exit + ".");
            } else if (!stopping) {
                if (drain != null) {
                    drain.join(1_000);
                }
                String output = drain == null ? logTail(settings.backendLog, logStart) : joined(tail);
                lastProblem = "it exited with code " + exit + " during start-up."
                        + (output.isBlank() ? "" : " Its last output:\n" + output);
                LOG.error("The backend (pid " + child.pid() + ") failed to start: " + lastProblem);
                failedToStart();
            }
        } finally {
            synchronized (lock) {
                ready = false;
                process = null;
            }
            if (child.isAlive()) {
                destroy(child);
            }
        }
    }

    private void failedToStart() {
        synchronized (lock) {
            startFailed = true;
            lock.notifyAll();
        }
    }

    /** Returns whether the child became healthy; false when it exited first or the bridge is stopping. */
    private boolean waitUntilHealthy(Process child) throws InterruptedException {
        long warnAt = System.nanoTime() + settings.startupWait.toNanos();
        boolean warned = false;
        HttpRequest health = HttpRequest.newBuilder(url.resolve("/healthz"))
                .timeout(Duration.ofSeconds(2)).GET().build();
        while (child.isAlive() && !stopping) {
            try {
                if (healthClient.send(health, HttpResponse.BodyHandlers.discarding()).statusCode() == 200) {
                    synchronized (lock) {
                        ready = true;
                        lock.notifyAll();
                    }
                    lastProblem = null;
                    LOG.info("The backend at " + url + " is ready.");
                    return true;
                }
            } catch (IOException e) {
                // not listening yet
            }
            if (!warned && System.nanoTime() > warnAt) {
                warned = true;
                LOG.warn("The backend at " + url + " is still not healthy after "
                        + settings.startupWait.toMillis() + " ms; still waiting.");
            }
            Thread.sleep(HEALTH_POLL.toMillis());
        }
        return false;
    }

    /** Logs the child's output line by line, keeping the last lines in {@code tail}. */
    private static Thread drainOutput(Process child, Deque<String> tail) {
        return DaemonThreads.start("backend-output", () -> {
            try (BufferedReader reader = new BufferedReader(
                    new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = reader.readLine()) != null) {
                    LOG.info("[backend] " + line);
                    synchronized (tail) {
                        tail.addLast(line);
                        if (tail.size() > TAIL_LINES) {
                            tail.removeFirst();
                        }
                    }
                }
            } catch (IOException e) {
                // the child is gone
            }
        });
    }

    private static String joined(Deque<String> tail) {
        synchronized (tail) {
            return String.join("\n", tail);
        }
    }

    /** The last lines this run of the child appended to the log file (earlier runs' lines excluded). */
    private static String logTail(Path log, long from) {
        try (RandomAccessFile file = new RandomAccessFile(log.toFile(), "r")) {
            long start = Math.max(from, file.length() - TAIL_BYTES);
            byte[] bytes = new byte[(int) Math.max(0, file.length() - start)];
            file.seek(start);
            file.readFully(bytes);
            List<String> lines = Arrays.asList(new String(bytes, StandardCharsets.UTF_8).split("\\R"));
            return String.join("\n", lines.subList(Math.max(0, lines.size() - TAIL_LINES), lines.size()));
        } catch (IOException e) {
            return "(could not read " + log + ": " + e.getMessage() + ")";
        }
    }

    private static void destroy(Process child) {
        List<ProcessHandle> descendants = child.descendants().toList();
        child.destroy();
        descendants.forEach(ProcessHandle::destroy);
        try {
            if (!child.waitFor(5, TimeUnit.SECONDS)) {
                child.destroyForcibly();
            }
        } catch (InterruptedException e) {
            child.destroyForcibly();
            Thread.currentThread().interrupt();
        }
        descendants.stream().filter(ProcessHandle::isAlive).forEach(ProcessHandle::destroyForcibly);
    }

    private static int freeLoopbackPort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            socket.setReuseAddress(true);
            return socket.getLocalPort();
        }
    }
}
