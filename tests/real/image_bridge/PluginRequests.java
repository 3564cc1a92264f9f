import com.thoughtworks.go.plugin.api.GoApplicationAccessor;
import com.thoughtworks.go.plugin.api.request.DefaultGoPluginApiRequest;
import com.thoughtworks.go.plugin.api.request.GoApiRequest;
import com.thoughtworks.go.plugin.api.response.DefaultGoApiResponse;
import com.thoughtworks.go.plugin.api.response.GoApiResponse;
import com.thoughtworks.go.plugin.api.response.GoPluginApiResponse;
import org.gocd.contrib.reuse.bridge.KubernetesReuseElasticAgentPlugin;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * Plugin requests from the bridge jar, as GoCD makes them, to a backend it did not start: tests/real/test_image.py
 * runs this (Java's single-file source launcher, the jar the image's init container copied out and
 * go-plugin-api on the class path) inside the network namespace of the backend's container, whose
 * loopback is the only network the backend has. The plugin is configured as the GoCD server container of
 * the chart configures it, by GOCD_REUSE_BACKEND_URL and GOCD_REUSE_TOKEN_FILE.
 *
 * <p>It sends get-capabilities, then server-ping, which the backend answers only after calling
 * list-agents back through the jar's callback endpoint; a stand-in for the GoCD server answers that
 * call. Each answer is printed as one line: the request, its response code, the server calls made while
 * it was handled, and the response body.
 */
public class PluginRequests {
    public static void main(String[] args) throws Exception {
        List<String> calls = new CopyOnWriteArrayList<>();
        GoApplicationAccessor gocd = new GoApplicationAccessor() {
            @Override
            public GoApiResponse submit(GoApiRequest request) {
                calls.add(request.api());
                DefaultGoApiResponse response = new DefaultGoApiResponse(200);
                response.setResponseBody(request.api().endsWith(".list-agents") ? "[]" : "{}");
                return response;
            }
        };
        // The public constructor GoCD calls: settings from the environment, as in the server container.
        KubernetesReuseElasticAgentPlugin plugin = new KubernetesReuseElasticAgentPlugin();
        plugin.initializeGoApplicationAccessor(gocd);
        try {
            for (String[] request : new String[][]{
                    {"get-capabilities", null},
                    {"server-ping", "{\"all_cluster_profile_properties\":[]}"}}) {
                calls.clear();
                DefaultGoPluginApiRequest sent = new DefaultGoPluginApiRequest("elastic-agent", "5.0",
                        "cd.go.elastic-agent." + request[0]);
                sent.setRequestBody(request[1]);
                GoPluginApiResponse answer = plugin.handle(sent);
                System.out.println(request[0] + "\t" + answer.responseCode() + "\t" + String.join(",", calls)
                        + "\t" + answer.responseBody().replace('\n', ' '));
            }
        } finally {
            plugin.close();
        }
    }
}
