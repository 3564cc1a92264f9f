package org.gocd.contrib.reuse.bridge;

import com.thoughtworks.go.plugin.api.logging.Logger;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

/**
 * The jar's version and the backend's: the jar says its own on every request it forwards
 * ({@value #BRIDGE_HEADER}), the backend its own on every answer ({@value #BACKEND_HEADER}).
 *
 * <p>Both come from one build (the image carries the jar and the backend), and only a jar and a backend
 * of one release are tested together. While they differ, the backend puts a warning in GoCD's health
 * messages and at the top of the plugin status page; this class logs it in the plugin's log, once per
 * distinct backend version (agents poll often: one line per answer would flood the log). A backend too
 * old to say its version is logged once too.
 *
 * <p>Thread-safe: GoCD calls {@code handle()} from many threads at once.
 */
final class VersionCheck {
    /** The request header with the jar's version. */
    static final String BRIDGE_HEADER = "X-GoCD-Reuse-Bridge-Version";
    /** The answer header with the backend's version. */
    static final String BACKEND_HEADER = "X-GoCD-Reuse-Backend-Version";
    /** What the jar says when its version resource is missing (a build outside Maven). */
    static final String UNKNOWN = "unknown";

    private static final Logger LOG = Logger.getLoggerFor(VersionCheck.class);
    private static final String RESOURCE = "/bridge-version.properties";
    /** Distinct backend versions remembered as warned about; past this, each is warned about again. */
    private static final int REMEMBERED = 32;
    /** Stands for "the backend said no version" among the warned versions. */
    private static final String NONE = "";

    private final String bridgeVersion;
    private final Consumer<String> warn;
    private final Set<String> warned = ConcurrentHashMap.newKeySet();
    private volatile String backendVersion;
    private volatile boolean heard;

    /** The jar's own version, from the build; logs to the plugin's log. */
    VersionCheck() {
        this(ownVersion(), LOG::warn);
    }

    /** For tests: a given jar version, and where warnings go. */
    VersionCheck(String bridgeVersion, Consumer<String> warn) {
        this.bridgeVersion = bridgeVersion;
        this.warn = warn;
    }

    /** This jar's version, as Maven wrote it into {@value #RESOURCE}; {@value #UNKNOWN} without it. */
    static String ownVersion() {
        try (InputStream in = VersionCheck.class.getResourceAsStream(RESOURCE)) {
            if (in == null) {
                return UNKNOWN;
            }
            Properties properties = new Properties();
            properties.load(in);
            String version = properties.getProperty("version", "").trim();
            return version.isEmpty() || version.startsWith("${") ? UNKNOWN : version;
        } catch (IOException | IllegalArgumentException e) {
            return UNKNOWN;
        }
    }

    /** The jar's version, sent in {@value #BRIDGE_HEADER}. */
    String bridgeVersion() {
        return bridgeVersion;
    }

    /** The backend's version as its last answer said it; null before any answer, or when it said none. */
    String backendVersion() {
        return backendVersion;
    }

    /**
     * Records the version an answer of the backend carried ({@code header}: the header's value, null
     * without one), and warns once per distinct version that is not the jar's.
     */
    void answered(String header) {
        String version = header == null || header.isBlank() ? null : header.strip();
        backendVersion = version;
        heard = true;
        String problem = problem(bridgeVersion, version);
        if (problem == null) {
            return;
        }
        if (warned.size() >= REMEMBERED) {
            warned.clear();
        }
        if (warned.add(version == null ? NONE : version)) {
            warn.accept(problem);
        }
    }

    /** The difference, as a sentence for the administrator, as of the last answer; null when none. */
    String problem() {
        return heard ? problem(bridgeVersion, backendVersion) : null;
    }

    /** The sentence for a jar of version {@code bridge} and a backend of {@code backend}; null when equal. */
    static String problem(String bridge, String backend) {
        String remedy = "install the jar and the backend of one release (docs/install.md, Upgrading).";
        if (backend == null) {
            return "The plugin's backend does not say its version (it is older than its jar, version " + bridge
                    + "): " + remedy;
        }
        if (backend.equals(bridge)) {
            return null;
        }
        return "The plugin's jar is version " + bridge + " but its backend is version " + shown(backend) + ": "
                + remedy;
    }

    /** A header's value as logged: letters, digits and version punctuation only, at most 64 of them. */
    private static String shown(String value) {
        String kept = value.replaceAll("[^0-9A-Za-z.+_~-]", "?");
        return kept.length() > 64 ? kept.substring(0, 64) + "..." : kept;
    }
}
