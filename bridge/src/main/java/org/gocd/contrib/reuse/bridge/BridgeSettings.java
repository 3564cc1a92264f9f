package org.gocd.contrib.reuse.bridge;

import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Function;

/**
 * The bridge's configuration, read from JVM system properties or environment variables.
 *
 * <p>GoCD gives an elastic-agent plugin no settings of its own before it is loaded, and the plugin must
 * reach its backend during load (migrate-config, icon, metadata), so the only place an administrator can
 * configure the bridge is the server's JVM: a system property (for example in
 * {@code GOCD_SERVER_JVM_OPTS} or {@code wrapper-properties.conf}) or an environment variable of the
 * server process. A system property wins over the environment variable of the same setting.
 *
 * <table>
 * <caption>Settings</caption>
 * <tr><th>System property</th><th>Environment variable</th><th>Default</th></tr>
 * <tr><td>gocd.reuse.backend.url</td><td>GOCD_REUSE_BACKEND_URL</td><td>http://127.0.0.1:8155</td></tr>
 * <tr><td>gocd.reuse.token</td><td>GOCD_ELASTIC_AGENT_TOKEN</td><td>none</td></tr>
 * <tr><td>gocd.reuse.token.file</td><td>GOCD_REUSE_TOKEN_FILE</td><td>none</td></tr>
 * <tr><td>gocd.reuse.backend.command</td><td>GOCD_REUSE_BACKEND_COMMAND</td><td>none</td></tr>
 * <tr><td>gocd.reuse.backend.workdir</td><td>GOCD_REUSE_BACKEND_WORKDIR</td><td>the server's working directory</td></tr>
 * <tr><td>gocd.reuse.backend.log</td><td>GOCD_REUSE_BACKEND_LOG</td><td>none: output goes to the plugin log</td></tr>
 * <tr><td>gocd.reuse.callback.port</td><td>GOCD_REUSE_CALLBACK_PORT</td><td>0 (any free port)</td></tr>
 * <tr><td>gocd.reuse.timeout.connect.ms</td><td>GOCD_REUSE_TIMEOUT_CONNECT_MS</td><td>2000</td></tr>
 * <tr><td>gocd.reuse.timeout.default.ms</td><td>GOCD_REUSE_TIMEOUT_DEFAULT_MS</td><td>30000</td></tr>
 * <tr><td>gocd.reuse.timeout.should-assign-work.ms</td><td>GOCD_REUSE_TIMEOUT_SHOULD_ASSIGN_WORK_MS</td><td>2000</td></tr>
 * <tr><td>gocd.reuse.timeout.create-agent.ms</td><td>GOCD_REUSE_TIMEOUT_CREATE_AGENT_MS</td><td>60000</td></tr>
 * <tr><td>gocd.reuse.timeout.status-report.ms</td><td>GOCD_REUSE_TIMEOUT_STATUS_REPORT_MS</td><td>60000</td></tr>
 * <tr><td>gocd.reuse.backend.startup-wait.ms</td><td>GOCD_REUSE_BACKEND_STARTUP_WAIT_MS</td><td>60000</td></tr>
 * <tr><td>gocd.reuse.backend.restart-backoff-max.ms</td><td>GOCD_REUSE_BACKEND_RESTART_BACKOFF_MAX_MS</td><td>30000</td></tr>
 * </table>
 *
 * <p>With a backend command the bridge starts the backend itself and generates its token; the URL and
 * token settings are then ignored.
 */
final class BridgeSettings {
    static final String BACKEND_URL = "gocd.reuse.backend.url";
    static final String TOKEN = "gocd.reuse.token";
    static final String TOKEN_FILE = "gocd.reuse.token.file";
    static final String BACKEND_COMMAND = "gocd.reuse.backend.command";
    static final String BACKEND_WORKDIR = "gocd.reuse.backend.workdir";
    static final String BACKEND_LOG = "gocd.reuse.backend.log";
    static final String CALLBACK_PORT = "gocd.reuse.callback.port";
    static final String TIMEOUT_CONNECT = "gocd.reuse.timeout.connect.ms";
    static final String TIMEOUT_DEFAULT = "gocd.reuse.timeout.default.ms";
    static final String TIMEOUT_SHOULD_ASSIGN_WORK = "gocd.reuse.timeout.should-assign-work.ms";
    static final String TIMEOUT_CREATE_AGENT = "gocd.reuse.timeout.create-agent.ms";
    static final String TIMEOUT_STATUS_REPORT = "gocd.reuse.timeout.status-report.ms";
    static final String STARTUP_WAIT = "gocd.reuse.backend.startup-wait.ms";
    static final String RESTART_BACKOFF_MAX = "gocd.reuse.backend.restart-backoff-max.ms";

    /** The backend reads its token from this variable; the bridge accepts the same name for symmetry. */
    static final String TOKEN_ENV = "GOCD_ELASTIC_AGENT_TOKEN";
    static final String DEFAULT_BACKEND_URL = "http://127.0.0.1:8155";

    private static final String REQUEST_PREFIX = "cd.go.elastic-agent.";

    final URI backendUrl;
    /** The shared token itself ({@link #TOKEN}), or null; it wins over the token file. */
    final String token;
    /**
     * The file holding the shared token ({@link #TOKEN_FILE}), or null. Read again at every request (see
     * {@link #currentToken()}): a Kubernetes Secret mounted as a file changes under a running server.
     */
    final Path tokenFile;
    /** The backend command split into arguments; empty when the backend runs on its own. */
    final List<String> backendCommand;
    final Path backendWorkDir;
    final Path backendLog;
    final int callbackPort;
    final Duration connectTimeout;
    final Duration defaultTimeout;
    final Duration shouldAssignWorkTimeout;
    final Duration createAgentTimeout;
    final Duration statusReportTimeout;
    final Duration startupWait;
    final Duration restartBackoffMax;

    private BridgeSettings(Function<String, String> lookup) {
        backendUrl = parseUrl(lookup.apply(BACKEND_URL));
        backendCommand = splitCommand(lookup.apply(BACKEND_COMMAND));
        String workDir = lookup.apply(BACKEND_WORKDIR);
        backendWorkDir = workDir == null ? null : Path.of(workDir);
        String log = lookup.apply(BACKEND_LOG);
        backendLog = log == null ? null : Path.of(log);
        callbackPort = (int) number(lookup, CALLBACK_PORT, 0, 0, 65535);
        connectTimeout = millis(lookup, TIMEOUT_CONNECT, 2_000);
        defaultTimeout = millis(lookup, TIMEOUT_DEFAULT, 30_000);
        shouldAssignWorkTimeout = millis(lookup, TIMEOUT_SHOULD_ASSIGN_WORK, 2_000);
        createAgentTimeout = millis(lookup, TIMEOUT_CREATE_AGENT, 60_000);
        statusReportTimeout = millis(lookup, TIMEOUT_STATUS_REPORT, 60_000);
        startupWait = millis(lookup, STARTUP_WAIT, 60_000);
        restartBackoffMax = millis(lookup, RESTART_BACKOFF_MAX, 30_000);

        token = lookup.apply(TOKEN);
        String file = lookup.apply(TOKEN_FILE);
        tokenFile = file == null ? null : Path.of(file);
    }

    /** The token to send now, or why there is none ({@code problem}, a clause for a sentence). */
    record Token(String value, String problem) {
    }

    /**
     * The token itself when it is set, otherwise the token file's content read now, surrounding white
     * space (the newline a file usually ends with) removed. Read at every request rather than once: when
     * the Secret behind the file is rotated, the next request and the next callback use the new token
     * without a server restart. The file is a few bytes; reading it costs microseconds. Never throws.
     */
    Token currentToken() {
        if (token != null) {
            return new Token(token, null);
        }
        if (tokenFile == null) {
            return new Token(null, "no token is configured");
        }
        try {
            String read = Files.readString(tokenFile, StandardCharsets.UTF_8).trim();
            if (read.isEmpty()) {
                return new Token(null, "the token file " + tokenFile + " (" + TOKEN_FILE + ") is empty");
            }
            return new Token(read, null);
        } catch (IOException | RuntimeException e) {
            return new Token(null, "the token file " + tokenFile + " (" + TOKEN_FILE + ") could not be read: "
                    + e.getClass().getSimpleName());
        }
    }

    /** Settings from this JVM's system properties and environment, as GoCD runs the plugin. */
    static BridgeSettings fromSystem() {
        return from(System.getProperties()::getProperty, System.getenv());
    }

    /**
     * Settings from a property lookup and an environment map; a property wins over the variable.
     * Blank values count as unset, so {@code -Dgocd.reuse.backend.command=} switches a setting off.
     */
    static BridgeSettings from(Function<String, String> properties, Map<String, String> environment) {
        return new BridgeSettings(name -> {
            String value = properties.apply(name);
            if (value == null) {
                value = environment.get(environmentName(name));
            }
            return value == null || value.isBlank() ? null : value.trim();
        });
    }

    /** Settings from explicit properties only (tests, and the latency tool). */
    static BridgeSettings of(Map<String, String> properties) {
        return from(properties::get, Map.of());
    }

    /** The environment variable of a setting: upper case, dots and dashes as underscores. */
    static String environmentName(String property) {
        if (property.equals(TOKEN)) {
            return TOKEN_ENV;
        }
        return property.toUpperCase(Locale.ROOT).replace('.', '_').replace('-', '_');
    }

    /** Whether the bridge starts and supervises the backend itself. */
    boolean launchesBackend() {
        return !backendCommand.isEmpty();
    }

    /**
     * How long the backend may take to answer a request. should-assign-work is short because GoCD asks
     * it while holding its global work-assignment lock; create-agent and status reports may talk to the
     * Kubernetes API and render pages, so they get longer.
     */
    Duration timeoutFor(String requestName) {
        String name = requestName == null ? "" : requestName;
        if (name.equals(REQUEST_PREFIX + "should-assign-work")) {
            return shouldAssignWorkTimeout;
        }
        if (name.equals(REQUEST_PREFIX + "create-agent")) {
            return createAgentTimeout;
        }
        if (name.startsWith(REQUEST_PREFIX) && name.endsWith("-status-report")) {
            return statusReportTimeout;
        }
        return defaultTimeout;
    }

    /**
     * Requests GoCD sends while loading the plugin. A failure there marks the plugin invalid until the
     * server restarts, so for these the bridge waits for a backend that is still starting.
     */
    static boolean isLoadTimeRequest(String requestName) {
        if (requestName == null) {
            return false;
        }
        if (requestName.startsWith("go.plugin-settings.")) {
            return true;
        }
        if (!requestName.startsWith(REQUEST_PREFIX)) {
            return false;
        }
        String name = requestName.substring(REQUEST_PREFIX.length());
        return name.equals("migrate-config") || name.equals("get-icon") || name.equals("get-capabilities")
                || name.endsWith("-metadata") || name.endsWith("-view");
    }

    private static URI parseUrl(String value) {
        String text = value == null ? DEFAULT_BACKEND_URL : value;
        while (text.endsWith("/")) {
            text = text.substring(0, text.length() - 1);
        }
        URI uri = URI.create(text);
        if (!"http".equals(uri.getScheme()) && !"https".equals(uri.getScheme())) {
            throw new IllegalArgumentException(BACKEND_URL + " must be an http:// or https:// URL, not " + text);
        }
        return uri;
    }

    private static Duration millis(Function<String, String> lookup, String name, long fallback) {
        return Duration.ofMillis(number(lookup, name, fallback, 1, Long.MAX_VALUE));
    }

    private static long number(Function<String, String> lookup, String name, long fallback, long min, long max) {
        String value = lookup.apply(name);
        if (value == null) {
            return fallback;
        }
        try {
            long parsed = Long.parseLong(value);
            if (parsed < min || parsed > max) {
                throw new IllegalArgumentException(name + " must be between " + min + " and " + max
                        + ", not " + value);
            }
            return parsed;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + " must be a whole number, not '" + value + "'", e);
        }
    }

    /**
     * Splits a command line into arguments: whitespace separates, single or double quotes group, a
     * backslash escapes the next character outside single quotes. No shell is involved, so nothing is
     * expanded and the token never appears on a command line.
     */
    static List<String> splitCommand(String line) {
        List<String> args = new ArrayList<>();
        if (line == null) {
            return args;
        }
        StringBuilder current = new StringBuilder();
        boolean inArg = false;
        char quote = 0;
        for (int i = 0; i < line.length(); i++) {
            char c = line.charAt(i);
            if (quote == 0 && Character.isWhitespace(c)) {
                if (inArg) {
                    args.add(current.toString());
                    current.setLength(0);
                    inArg = false;
                }
            } else if (quote == 0 && (c == '\'' || c == '"')) {
                quote = c;
                inArg = true;
            } else if (c == quote) {
                quote = 0;
            } else if (c == '\\' && quote != '\'' && i + 1 < line.length()) {
                current.append(line.charAt(++i));
                inArg = true;
            } else {
                current.append(c);
                inArg = true;
            }
        }
        if (quote != 0) {
            throw new IllegalArgumentException(BACKEND_COMMAND + " has an unclosed quote: " + line);
        }
        if (inArg) {
            args.add(current.toString());
        }
        return List.copyOf(args);
    }
}
