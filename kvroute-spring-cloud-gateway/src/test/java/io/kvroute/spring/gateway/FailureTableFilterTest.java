package io.kvroute.spring.gateway;

import io.kvroute.connector.InferenceRequest;
import io.kvroute.router.KvRouter;
import io.kvroute.router.contract.FailureTableContract;
import java.time.Duration;
import java.util.Map;
import org.springframework.http.MediaType;
import org.springframework.mock.http.server.reactive.MockServerHttpRequest;
import org.springframework.mock.http.server.reactive.MockServerHttpResponse;
import org.springframework.mock.web.server.MockServerWebExchange;
import reactor.core.publisher.Mono;

/** The failure table through the Spring Cloud Gateway filter, in relay mode. */
class FailureTableFilterTest extends FailureTableContract {

  @Override
  protected Seen send(
      KvRouter router, InferenceRequest.Api api, byte[] body, Map<String, String> headers) {
    KvRouteGlobalFilter filter =
        new KvRouteGlobalFilter(router, KvRouteProperties.Mode.RELAY, 1 << 20);
    MockServerHttpRequest.BodyBuilder rb =
        MockServerHttpRequest.post(api.path()).contentType(MediaType.APPLICATION_JSON);
    headers.forEach(rb::header);
    MockServerWebExchange exchange =
        MockServerWebExchange.from(
            rb.body(new String(body, java.nio.charset.StandardCharsets.UTF_8)));
    filter.filter(exchange, e -> Mono.empty()).block(Duration.ofSeconds(30));
    MockServerHttpResponse r = exchange.getResponse();
    String text = r.getBodyAsString().block(Duration.ofSeconds(30));
    return new Seen(
        r.getStatusCode() == null ? 200 : r.getStatusCode().value(),
        r.getHeaders().toSingleValueMap(),
        text == null ? "" : text);
  }
}
