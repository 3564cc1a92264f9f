package org.gocd.contrib.reuse.bridge;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class BridgeSettingsTest {
    @Test
    void defaultsNeedNoConfiguration() {
        BridgeSettings settings = BridgeSettings.of(Map.of());
        assertEquals("http://127.0.0.1:8155", settings.backendUrl.toString());
        assertNull(settings.token);
        assertFalse(settings.launchesBackend());
        assertEquals(0, settings.callbackPort);
        assertEquals(Duration.ofSeconds(2), settings.timeoutFor("cd.go.elastic-agent.should-assign-work"));
        assertEquals(Duration.ofSeconds(60), settings.timeoutFor("cd.go.elastic-agent.create-agent"));
        assertEquals(Duration.ofSeconds(60), settings.timeoutFor("cd.go.elastic-agent.cluster-status-report"));
        assertEquals(Duration.ofSeconds(60), settings.timeoutFor("cd.go.elastic-agent.agent-status-report"));
        assertEquals(Duration.ofSeconds(30), settings.timeoutFor("cd.go.elastic-agent.server-ping"));
        assertEquals(Duration.ofSeconds(60), settings.startupWait);
    }

    @Test
    void systemPropertyWinsOverEnvironmentVariable() {
        BridgeSettings settings = BridgeSettings.from(
                Map.of("gocd.reuse.backend.url", "http://127.0.0.1:9000/")::get,
                Map.of("GOCD_REUSE_BACKEND_URL", "http://127.0.0.1:7000",
                        "GOCD_ELASTIC_AGENT_TOKEN", "from-env",
                        "GOCD_REUSE_TIMEOUT_SHOULD_ASSIGN_WORK_MS", "750"));
        assertEquals("http://127.0.0.1:9000", settings.backendUrl.toString());
        assertEquals("from-env", settings.token);
        assertEquals(Duration.ofMillis(750), settings.shouldAssignWorkTimeout);
    }

    @Test
    void environmentNamesFollowOneRule() {
        assertEquals("GOCD_ELASTIC_AGENT_TOKEN", BridgeSettings.environmentName("gocd.reuse.token"));
        assertEquals("GOCD_REUSE_TOKEN_FILE", BridgeSettings.environmentName("gocd.reuse.token.file"));
        assertEquals("GOCD_REUSE_BACKEND_COMMAND", BridgeSettings.environmentName("gocd.reuse.backend.command"));
        assertEquals("GOCD_REUSE_TIMEOUT_CREATE_AGENT_MS",
                BridgeSettings.environmentName("gocd.reuse.timeout.create-agent.ms"));
    }

    @Test
    void tokenFileIsReadAndTrimmed(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("token");
        Files.writeString(file, "s3cret\n");
        BridgeSettings settings = BridgeSettings.of(Map.of("gocd.reuse.token.file", file.toString()));
        assertNull(settings.token);
        assertEquals(new BridgeSettings.Token("s3cret", null), settings.currentToken());
        Files.writeString(file, "  s3cret\r\n\n");
        assertEquals("s3cret", settings.currentToken().value(), "CRLF and blank lines as well");
    }

    @Test
    void tokenFileIsReadAgainWhenItChanges(@TempDir Path dir) throws Exception {
        // As kubelet updates a mounted Secret: a new file behind the same path, no restart.
        Path file = dir.resolve("token");
        Files.writeString(file, "first\n");
        BridgeSettings settings = BridgeSettings.of(Map.of("gocd.reuse.token.file", file.toString()));
        assertEquals("first", settings.currentToken().value());
        Path rotated = dir.resolve("token.new");
        Files.writeString(rotated, "second\n");
        Files.move(rotated, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        assertEquals("second", settings.currentToken().value());
        Files.writeString(file, "thrice");  // rewritten in place, same length
        assertEquals("thrice", settings.currentToken().value());
    }

    @Test
    void tokenItselfWinsOverTheTokenFile(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("token");
        Files.writeString(file, "from-file\n");
        BridgeSettings settings = BridgeSettings.from(Map.of("gocd.reuse.token.file", file.toString())::get,
                Map.of("GOCD_ELASTIC_AGENT_TOKEN", "from-env"));
        assertEquals("from-env", settings.currentToken().value());
    }

    @Test
    void tokenFileFromTheEnvironment(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("token");
        Files.writeString(file, "sidecar-token\n");
        BridgeSettings settings = BridgeSettings.from(name -> null, Map.of(
                "GOCD_REUSE_BACKEND_URL", "http://127.0.0.1:8155", "GOCD_REUSE_TOKEN_FILE", file.toString()));
        assertEquals("sidecar-token", settings.currentToken().value());
        assertEquals(file, settings.tokenFile);
        assertFalse(settings.launchesBackend());
    }

    @Test
    void unreadableOrEmptyTokenFileIsReportedNotThrown(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("missing");
        BridgeSettings settings = BridgeSettings.of(Map.of("gocd.reuse.token.file", file.toString()));
        assertNull(settings.currentToken().value());
        assertTrue(settings.currentToken().problem().contains("could not be read"), settings.currentToken().problem());
        Files.writeString(file, " \n");
        assertNull(settings.currentToken().value());
        assertTrue(settings.currentToken().problem().contains("is empty"), settings.currentToken().problem());
        Files.writeString(file, "late\n");
        assertEquals(new BridgeSettings.Token("late", null), settings.currentToken());
        assertEquals("no token is configured", BridgeSettings.of(Map.of()).currentToken().problem());
    }

    @Test
    void badNumbersAreExplained() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> BridgeSettings.of(Map.of("gocd.reuse.timeout.default.ms", "ten")));
        assertTrue(e.getMessage().contains("gocd.reuse.timeout.default.ms"));
    }

    @Test
    void commandLinesSplitWithoutAShell() {
        assertEquals(List.of("python3", "-m", "elastic_agent", "serve"),
                BridgeSettings.splitCommand("  python3 -m  elastic_agent serve "));
        assertEquals(List.of("/opt/my venv/bin/python", "-m", "elastic_agent", "serve", "$HOME", ""),
                BridgeSettings.splitCommand("'/opt/my venv/bin/python' -m elastic_agent serve $HOME \"\""));
        assertEquals(List.of("a b"), BridgeSettings.splitCommand("a\\ b"));
        assertThrows(IllegalArgumentException.class, () -> BridgeSettings.splitCommand("python3 'oops"));
    }

    @Test
    void loadTimeRequestsAreRecognised() {
        for (String name : List.of("migrate-config", "get-icon", "get-capabilities",
                "get-cluster-profile-metadata", "get-elastic-agent-profile-metadata",
                "get-cluster-profile-view", "get-elastic-agent-profile-view")) {
            assertTrue(BridgeSettings.isLoadTimeRequest("cd.go.elastic-agent." + name), name);
        }
        assertTrue(BridgeSettings.isLoadTimeRequest("go.plugin-settings.get-configuration"));
        for (String name : List.of("create-agent", "should-assign-work", "server-ping", "job-completion",
                "validate-cluster-profile", "cluster-status-report")) {
            assertFalse(BridgeSettings.isLoadTimeRequest("cd.go.elastic-agent." + name), name);
        }
    }
}
