package org.gocd.contrib.reuse.bridge;

import com.thoughtworks.go.plugin.api.response.GoPluginApiResponse;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The jar's version against the backend's: sent on every request, compared on every answer. */
class VersionCheckTest {
    private final List<String> warnings = new CopyOnWriteArrayList<>();
    private final VersionCheck check = new VersionCheck("1.2.0", warnings::add);
    private FakeBackend backend;
    private KubernetesReuseElasticAgentPlugin plugin;

    @AfterEach
    void tearDown() {
        if (plugin != null) {
            plugin.close();
        }
        if (backend != null) {
            backend.close();
        }
    }

    @Test
    void aBackendOfTheSameVersionIsNoProblemAndNothingIsLogged() {
        check.answered("1.2.0");
        check.answered(" 1.2.0 ");
        assertTrue(warnings.isEmpty(), warnings.toString());
        assertNull(check.problem());
        assertEquals("1.2.0", check.backendVersion());
    }

    @Test
    void nothingIsAProblemBeforeTheBackendAnswered() {
        assertNull(check.problem());
        assertNull(check.backendVersion());
    }

    @Test
    void aBackendOfAnotherVersionIsWarnedAboutOncePerDistinctVersion() {
        for (int i = 0; i < 5; i++) {
            check.answered("1.1.0");
        }
        assertEquals(List.of("The plugin's jar is version 1.2.0 but its backend is version 1.1.0: install the jar"
                + " and the backend of one release (docs/install.md, Upgrading)."), warnings);

        check.answered("1.2.0");
        assertNull(check.problem(), "they agree again");
        check.answered("1.1.0");
        assertEquals(1, warnings.size(), "a version already warned about is not warned about again");

        check.answered("1.3.0");
        assertEquals(2, warnings.size());
        assertTrue(warnings.get(1).contains("its backend is version 1.3.0"), warnings.get(1));
        assertEquals(warnings.get(1), check.problem());
    }

    @Test
    void aBackendTooOldToSayItsVersionIsWarnedAboutOnce() {
        check.answered(null);
        check.answered("");
        check.answered(null);
        assertEquals(1, warnings.size(), warnings.toString());
        assertTrue(warnings.get(0).contains("does not say its version"), warnings.get(0));
        assertTrue(warnings.get(0).contains("version 1.2.0"), warnings.get(0));
        assertNull(check.backendVersion());
        assertNotEquals(null, check.problem());
    }

    @Test
    void aHeaderThatIsNoVersionIsLoggedCleanedAndCut() {
        check.answered("<b>" + "x".repeat(200));
        assertEquals(1, warnings.size());
        assertFalse(warnings.get(0).contains("<b>"), warnings.get(0));
        assertTrue(warnings.get(0).contains("?b?" + "x".repeat(61) + "..."), warnings.get(0));
    }

    @Test
    void theJarKnowsItsOwnVersionFromTheBuild() {
        // Maven filtered bridge-version.properties into target/classes, as into the jar.
        assertEquals(System.getProperty("bridge.plugin.version", VersionCheck.ownVersion()), VersionCheck.ownVersion());
        assertNotEquals(VersionCheck.UNKNOWN, VersionCheck.ownVersion());
        assertTrue(VersionCheck.ownVersion().matches("[0-9][0-9A-Za-z.+_~-]*"), VersionCheck.ownVersion());
    }

    @Test
    void everyForwardedRequestSaysTheJarsVersionAndTheAnswerIsChecked() throws Exception {
        backend = new FakeBackend().answering(r -> FakeBackend.Reply.of(200, "{}"));
        plugin = new KubernetesReuseElasticAgentPlugin(() -> BridgeSettings.of(Map.of(
                "gocd.reuse.backend.url", backend.url(), "gocd.reuse.token", "t")));
        plugin.initializeGoApplicationAccessor(new RecordingAccessor());

        GoPluginApiResponse response = plugin.handle(ForwardingTest.request("get-capabilities", null));

        assertEquals(200, response.responseCode());
        assertEquals(VersionCheck.ownVersion(), backend.last().header(VersionCheck.BRIDGE_HEADER));
        VersionCheck versions = plugin.bridge().versions();
        assertNull(versions.backendVersion(), "the fake backend says no version");
        assertTrue(versions.problem().contains("does not say its version"), versions.problem());

        backend.answering(r -> FakeBackend.Reply.of(200, "{}").with(VersionCheck.BACKEND_HEADER, "0.0.9"));
        plugin.handle(ForwardingTest.request("get-capabilities", null));
        assertEquals("0.0.9", versions.backendVersion());
        assertTrue(versions.problem().contains("but its backend is version 0.0.9"), versions.problem());

        backend.answering(r -> FakeBackend.Reply.of(200, "{}").with(VersionCheck.BACKEND_HEADER, versions.bridgeVersion()));
        plugin.handle(ForwardingTest.request("get-capabilities", null));
        assertNull(versions.problem(), "one release again");
    }
}
