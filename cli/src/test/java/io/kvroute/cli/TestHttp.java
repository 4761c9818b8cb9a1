package io.kvroute.cli;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

/** The HTTP calls tests make to a command they run: JSON posts and GETs, with generous timeouts. */
final class TestHttp {
  private static final HttpClient CLIENT =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private static final Duration TIMEOUT = Duration.ofSeconds(30);

  private TestHttp() {}

  /** POSTs {@code json} to {@code url} as {@code application/json}. */
  static HttpResponse<String> postJson(String url, String json)
      throws IOException, InterruptedException {
    return CLIENT.send(
        HttpRequest.newBuilder(URI.create(url))
            .timeout(TIMEOUT)
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(json))
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  /** GETs {@code url}. */
  static HttpResponse<String> get(String url) throws IOException, InterruptedException {
    return CLIENT.send(
        HttpRequest.newBuilder(URI.create(url)).timeout(TIMEOUT).GET().build(),
        HttpResponse.BodyHandlers.ofString());
  }
}
