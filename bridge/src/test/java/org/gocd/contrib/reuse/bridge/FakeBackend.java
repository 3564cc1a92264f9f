package org.gocd.contrib.reuse.bridge;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.function.Function;

/** An in-test stand-in for the Python backend: records what the bridge sends and answers as told. */
final class FakeBackend implements AutoCloseable {
    /** One request as the backend saw it. */
    record Received(String method, String path, Map<String, List<String>> headers, String body) {
        String header(String name) {
            return headers.entrySet().stream()
                    .filter(e -> e.getKey().equalsIgnoreCase(name))
                    .map(e -> e.getValue().get(0)).findFirst().orElse(null);
        }
    }

    /** What to answer, with which headers. */
    record Reply(int status, String body, long delayMillis, Map<String, String> headers) {
        Reply(int status, String body, long delayMillis) {
            this(status, body, delayMillis, Map.of());
        }

        static Reply of(int status, String body) {
            return new Reply(status, body, 0);
        }

        Reply with(String header, String value) {
            Map<String, String> more = new java.util.HashMap<>(headers);
            more.put(header, value);
            return new Reply(status, body, delayMillis, Map.copyOf(more));
        }
    }

    final List<Received> received = new CopyOnWriteArrayList<>();
    private final HttpServer server;
    private volatile Function<Received, Reply> answer = r -> Reply.of(200, "{}");

    FakeBackend() throws IOException {
        this(0);
    }

    FakeBackend(int port) throws IOException {
        CallbackServer.enableNoDelay();
        server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 64);
        server.setExecutor(Executors.newCachedThreadPool(new DaemonThreads("fake-backend")));
        server.createContext("/", this::serve);
        // Started from a daemon thread so its dispatcher is a daemon too, like the bridge's own server;
        // CallbackTest checks that no HTTP dispatcher thread is a non-daemon.
        try {
            DaemonThreads.start("fake-backend-start", server::start).join();
        } catch (InterruptedException e) {
            throw new IOException(e);
        }
    }

    FakeBackend answering(Function<Received, Reply> answer) {
        this.answer = answer;
        return this;
    }

    int port() {
        return server.getAddress().getPort();
    }

    String url() {
        return "http://127.0.0.1:" + port();
    }

    Received last() {
        return received.get(received.size() - 1);
    }

    private void serve(HttpExchange exchange) throws IOException {
        try (exchange) {
            String body = new String(exchange.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
            Received request = new Received(exchange.getRequestMethod(), exchange.getRequestURI().getPath(),
                    Map.copyOf(exchange.getRequestHeaders()), body);
            received.add(request);
            Reply reply = answer.apply(request);
            if (reply.delayMillis() > 0) {
                try {
                    Thread.sleep(reply.delayMillis());
                } catch (InterruptedException e) {
                    return;
                }
            }
            byte[] bytes = reply.body().getBytes(StandardCharsets.UTF_8);
            reply.headers().forEach((name, value) -> exchange.getResponseHeaders().add(name, value));
            exchange.sendResponseHeaders(reply.status(), bytes.length == 0 ? -1 : bytes.length);
            if (bytes.length > 0) {
                try (OutputStream out = exchange.getResponseBody()) {
                    out.write(bytes);
                }
            }
        } catch (IOException e) {
            // the bridge gave up (timeout tests)
        }
    }

    @Override
    public void close() {
        server.stop(0);
    }
}
