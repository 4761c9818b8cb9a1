package io.kvroute.spring.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/** A real HTTP client for the tests, and a bounded wait for asynchronous conditions. */
final class Http {
  private Http() {}

  static final HttpClient CLIENT =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(10))
          .build();

  static HttpResponse<String> post(int port, String path, String body, String... headers)
      throws Exception {
    return send(request(port, path, body, headers));
  }

  /**
   * Sends {@code request}; when it times out, every thread's stack goes to standard error first
   * (the gateway runs in this JVM: a blocked event loop or a stuck upstream call shows there).
   */
  static HttpResponse<String> send(HttpRequest request) throws Exception {
    try {
      return CLIENT.send(request, HttpResponse.BodyHandlers.ofString());
    } catch (HttpTimeoutException e) {
      StringBuilder dump = new StringBuilder("request timed out: " + request + "; threads:\n");
      for (ThreadInfo t : ManagementFactory.getThreadMXBean().dumpAllThreads(true, true)) {
        dump.append(t.getThreadName()).append(' ').append(t.getThreadState()).append('\n');
        for (StackTraceElement f : t.getStackTrace()) {
          dump.append("    at ").append(f).append('\n');
        }
      }
      System.err.println(dump);
      throw e;
    }
  }

  static HttpRequest request(int port, String path, String body, String... headers) {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .timeout(Duration.ofSeconds(60))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body));
    for (int i = 0; i + 1 < headers.length; i += 2) {
      b.header(headers[i], headers[i + 1]);
    }
    return b.build();
  }

  static HttpResponse<String> get(int port, String path) throws Exception {
    return send(
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .timeout(Duration.ofSeconds(30))
            .build());
  }

  /** Waits (60 s at most, generous for a loaded 2-core machine) until {@code condition} holds. */
  static void await(String what, BooleanSupplier condition) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (!condition.getAsBoolean()) {
      assertThat(System.nanoTime()).as("still waiting: " + what).isLessThan(deadline);
      TimeUnit.MILLISECONDS.sleep(10);
    }
  }

  static String chat(String model, String content, boolean stream, int maxTokens) {
    return "{\"model\":\""
        + model
        + "\",\"stream\":"
        + stream
        + ",\"max_tokens\":"
        + maxTokens
        + ",\"messages\":[{\"role\":\"user\",\"content\":\""
        + content
        + "\"}]}";
  }
}
