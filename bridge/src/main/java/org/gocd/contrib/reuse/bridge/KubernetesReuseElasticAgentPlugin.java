package org.gocd.contrib.reuse.bridge;

import com.thoughtworks.go.plugin.api.GoApplicationAccessor;
import com.thoughtworks.go.plugin.api.GoPlugin;
import com.thoughtworks.go.plugin.api.GoPluginIdentifier;
import com.thoughtworks.go.plugin.api.annotation.Extension;
import com.thoughtworks.go.plugin.api.annotation.UnLoad;
import com.thoughtworks.go.plugin.api.info.PluginContext;
import com.thoughtworks.go.plugin.api.logging.Logger;
import com.thoughtworks.go.plugin.api.request.GoPluginApiRequest;
import com.thoughtworks.go.plugin.api.response.DefaultGoPluginApiResponse;
import com.thoughtworks.go.plugin.api.response.GoPluginApiResponse;

import java.util.List;
import java.util.function.Supplier;

/**
 * The GoCD elastic-agent plugin {@code cd.go.contrib.elasticagent.kubernetes-reuse}: a thin shell that
 * forwards every request to the Python backend, which holds all the plugin's logic.
 *
 * <p>GoCD instantiates this class when it loads the jar, so the constructor does nothing; the callback
 * server, and the backend process when one is to be launched, start on the first {@link #handle} call.
 * {@link #handle} never throws: every failure becomes a non-200 answer with a sentence for the
 * administrator.
 *
 * <p>Configuration comes from system properties or environment variables, described in
 * {@link BridgeSettings} and in {@code bridge/README.md}. The most important ones:
 * {@code gocd.reuse.backend.command} / {@code GOCD_REUSE_BACKEND_COMMAND} (launch the backend as a child
 * process, e.g. {@code python3 -m elastic_agent serve}), or {@code gocd.reuse.backend.url} /
 * {@code GOCD_REUSE_BACKEND_URL} (default {@code http://127.0.0.1:8155}) with {@code gocd.reuse.token} /
 * {@code GOCD_ELASTIC_AGENT_TOKEN} or {@code gocd.reuse.token.file} / {@code GOCD_REUSE_TOKEN_FILE}.
 */
@Extension
public class KubernetesReuseElasticAgentPlugin implements GoPlugin {
    /** The plugin id, as in plugin.xml. */
    public static final String PLUGIN_ID = "cd.go.contrib.elasticagent.kubernetes-reuse";

    private static final Logger LOG = Logger.getLoggerFor(KubernetesReuseElasticAgentPlugin.class);
    private static final GoPluginIdentifier IDENTIFIER = new GoPluginIdentifier("elastic-agent", List.of("5.0"));

    private final Supplier<BridgeSettings> settingsSource;
    private final Object startLock = new Object();
    private volatile GoApplicationAccessor accessor;
    private volatile Bridge bridge;

    /** The constructor GoCD calls. Reads nothing yet: configuration is read on the first request. */
    public KubernetesReuseElasticAgentPlugin() {
        this(BridgeSettings::fromSystem);
    }

    /** For tests: the settings to start the bridge with. */
    KubernetesReuseElasticAgentPlugin(Supplier<BridgeSettings> settingsSource) {
        this.settingsSource = settingsSource;
    }

    @Override
    public void initializeGoApplicationAccessor(GoApplicationAccessor goApplicationAccessor) {
        this.accessor = goApplicationAccessor;
    }

    @Override
    public GoPluginApiResponse handle(GoPluginApiRequest request) {
        String name = "(unknown request)";
        try {
            name = request.requestName();
            BackendClient.Answer answer = bridge().forward(name, request.extensionVersion(), request.requestBody());
            return new DefaultGoPluginApiResponse(answer.code(), answer.body());
        } catch (Throwable t) {
            // Deliberately broad: an exception thrown into GoCD can mark the whole plugin invalid.
            String message = "The kubernetes-reuse plugin bridge failed to handle " + name + ": "
                    + t.getClass().getSimpleName() + (t.getMessage() == null ? "" : ": " + t.getMessage());
            LOG.error(message);
            return new DefaultGoPluginApiResponse(500, message);
        }
    }

    @Override
    public GoPluginIdentifier pluginIdentifier() {
        return IDENTIFIER;
    }

    /** GoCD calls this when it unloads the plugin: stop the backend and free the callback port. */
    @UnLoad
    public void unload(PluginContext context) {
        close();
    }

    /** Stops the bridge; a later request starts it again. */
    public void close() {
        synchronized (startLock) {
            if (bridge != null) {
                bridge.close();
                bridge = null;
            }
        }
    }

    /** The running bridge, started on first use; a failed start is retried by the next request. */
    Bridge bridge() throws Exception {
        Bridge current = bridge;
        if (current != null) {
            return current;
        }
        synchronized (startLock) {
            if (bridge == null) {
                bridge = Bridge.start(settingsSource.get(), () -> accessor, IDENTIFIER);
            }
            return bridge;
        }
    }
}
