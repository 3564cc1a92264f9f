package org.gocd.contrib.reuse.bridge;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * A child process that behaves like the backend's contract (serve --bind HOST:PORT, token from
 * GOCD_ELASTIC_AGENT_TOKEN, GET /healthz, POST /gocd/plugin/<name>), for the supervisor tests.
 * Request names it understands: "...die" exits; "...server-ping" calls list-agents through the callback
 * URL and answers with what came back; anything else answers with what the child saw. Started with
 * "crash" instead of "serve", it fails at once the way a backend without its dependencies does.
 */
public final class FakeBackendMain {
    private FakeBackendMain() {
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("crash")) {
            System.err.println("ModuleNotFoundError: No module named 'flask'");
            System.exit(4);
        }
        String token = System.getenv("GOCD_ELASTIC_AGENT_TOKEN");
        if (token == null || token.isEmpty()) {
            System.out.println("no token: refusing to start");
            System.exit(2);
        }
        int bind = Arrays.asList(args).indexOf("--bind");
        String[] hostPort = args[bind + 1].split(":");
        long healthDelayMillis = Long.parseLong(System.getenv().getOrDefault("FAKE_HEALTH_DELAY_MS", "300"));
        long readyAt = System.currentTimeMillis() + healthDelayMillis;
        String argLine = String.join(" ", args);

        HttpServer server = HttpServer.create(new InetSocketAddress(hostPort[0], Integer.parseInt(hostPort[1])), 16);
        server.createContext("/healthz", exchange ->
                reply(exchange, System.currentTimeMillis() >= readyAt ? 200 : 503, "ok"));
        server.createContext("/gocd/plugin/", exchange -> {
            if (!("Bearer " + token).equals(exchange.getRequestHeaders().getFirst("Authorization"))) {
                reply(exchange, 401, "bad token");
                return;
            }
            String name = exchange.getRequestURI().getPath().substring("/gocd/plugin/".length());
            String callback = exchange.getRequestHeaders().getFirst("X-GoCD-Callback-URL");
            if (name.endsWith("die")) {
                reply(exchange, 200, "bye");
                System.exit(3);
            }
            if (name.endsWith("server-ping")) {
                HttpResponse<String> agents;
                try {
                    agents = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
                                URI.create(callback + "/gocd/server/go.processor.elastic-agents.list-agents"))
                        .header("Authorization", "Bearer " + token)
                        .POST(HttpRequest.BodyPublishers.noBody()).build(), HttpResponse.BodyHandlers.ofString());
                } catch (InterruptedException e) {
                    throw new IOException(e);
                }
                reply(exchange, 200, agents.statusCode() + " " + agents.body());
                return;
            }
            reply(exchange, 200, "pid=" + ProcessHandle.current().pid()
                    + "\nargs=" + argLine
                    + "\ncallback-env=" + System.getenv("GOCD_ELASTIC_AGENT_CALLBACK_URL")
                    + "\ncallback-header=" + callback);
        });
        server.start();
        System.out.println("fake backend listening on " + args[bind + 1]);
    }

    private static void reply(HttpExchange exchange, int code, String body) throws IOException {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        exchange.sendResponseHeaders(code, bytes.length);
        try (OutputStream out = exchange.getResponseBody()) {
            out.write(bytes);
        }
    }
}
