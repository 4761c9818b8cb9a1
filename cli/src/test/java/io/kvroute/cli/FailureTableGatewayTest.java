package io.kvroute.cli;

import io.kvroute.connector.InferenceRequest;
import io.kvroute.router.KvRouter;
import io.kvroute.router.contract.FailureTableContract;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The failure table through {@code kvroute gateway}'s front: the gateway's handler over the row's
 * router, on the Netty edge, asked over real HTTP ({@code kvroute proxy} answers through the same
 * {@code OpenAiFront}).
 */
class FailureTableGatewayTest extends FailureTableContract {
  private final HttpClient http =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

  @Override
  protected Seen send(
      KvRouter router, InferenceRequest.Api api, byte[] body, Map<String, String> requestHeaders)
      throws Exception {
    try (OpenAiFront front =
        OpenAiFront.builder("gateway", GatewayCommand.handler(router))
            .listen("127.0.0.1", 0)
            .build()
            .start()) {
      HttpRequest.Builder rb =
          HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + front.port() + api.path()))
              .timeout(Duration.ofSeconds(30))
              .header("Content-Type", "application/json")
              .POST(HttpRequest.BodyPublishers.ofByteArray(body));
      requestHeaders.forEach(rb::header);
      HttpResponse<String> r = http.send(rb.build(), HttpResponse.BodyHandlers.ofString());
      Map<String, String> headers = new LinkedHashMap<>();
      r.headers().map().forEach((k, v) -> headers.put(k, v.get(0)));
      return new Seen(r.statusCode(), headers, r.body());
    }
  }
}
