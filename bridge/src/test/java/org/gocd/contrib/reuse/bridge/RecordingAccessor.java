package org.gocd.contrib.reuse.bridge;

import com.thoughtworks.go.plugin.api.GoApplicationAccessor;
import com.thoughtworks.go.plugin.api.request.GoApiRequest;
import com.thoughtworks.go.plugin.api.response.DefaultGoApiResponse;
import com.thoughtworks.go.plugin.api.response.GoApiResponse;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Function;

/** A GoCD server stand-in: records every server call and answers like GoCD would for this plugin. */
class RecordingAccessor extends GoApplicationAccessor {
    final List<GoApiRequest> calls = new CopyOnWriteArrayList<>();
    private final Function<GoApiRequest, GoApiResponse> answer;

    RecordingAccessor() {
        this(RecordingAccessor::gocdLike);
    }

    RecordingAccessor(Function<GoApiRequest, GoApiResponse> answer) {
        this.answer = answer;
    }

    @Override
    public GoApiResponse submit(GoApiRequest request) {
        calls.add(request);
        return answer.apply(request);
    }

    List<String> apiNames() {
        return calls.stream().map(GoApiRequest::api).toList();
    }

    static GoApiResponse ok(String body) {
        DefaultGoApiResponse response = new DefaultGoApiResponse(200);
        response.setResponseBody(body);
        return response;
    }

    /** Answers the calls the backend makes, with GoCD's shapes. */
    static GoApiResponse gocdLike(GoApiRequest request) {
        return switch (request.api()) {
            case "go.processor.server-info.get" -> ok("{\"server_id\":\"test-server-id\","
                    + "\"site_url\":\"http://gocd.example.com:8153/go\","
                    + "\"secure_site_url\":\"https://gocd.example.com/go\"}");
            case "go.processor.elastic-agents.list-agents" -> ok("[]");
            default -> ok("{}");
        };
    }
}
