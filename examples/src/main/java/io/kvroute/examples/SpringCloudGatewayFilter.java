package io.kvroute.examples;

import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.router.KvRouter;
import io.kvroute.router.RouteDecision;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import org.springframework.cloud.gateway.filter.GatewayFilterChain;
import org.springframework.cloud.gateway.filter.GlobalFilter;
import org.springframework.cloud.gateway.support.ServerWebExchangeUtils;
import org.springframework.core.Ordered;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.http.HttpStatus;
import org.springframework.web.server.ServerWebExchange;
import reactor.core.publisher.Mono;

/**
 * A Spring Cloud Gateway {@link GlobalFilter} that lets kvroute choose the model server.
 *
 * <p>Spring's load balancer never sees the request body, so routing by prompt happens here: the
 * filter reads the (cached) body, asks {@link KvRouter#decide} for the decode endpoint, points the
 * route at it, sets {@code x-prefiller-host-port} for a decode-side PD sidecar, and reports the
 * outcome when the exchange ends. Register it as a bean; order it after {@code
 * AdaptCachedBodyGlobalFilter} and before the routing filter.
 *
 * <pre>{@code
 * @Bean GlobalFilter kvroute(KvRouter router) { return new SpringCloudGatewayFilter(router); }
 * }</pre>
 */
public final class SpringCloudGatewayFilter implements GlobalFilter, Ordered {
  private final KvRouter router;

  /** A filter deciding with {@code router}. */
  public SpringCloudGatewayFilter(KvRouter router) {
    this.router = router;
  }

  @Override
  public int getOrder() {
    return Ordered.LOWEST_PRECEDENCE - 10; // after the request-url filter, before routing
  }

  @Override
  public Mono<Void> filter(ServerWebExchange exchange, GatewayFilterChain chain) {
    String path = exchange.getRequest().getURI().getPath();
    if (InferenceRequest.Api.fromPath(path).isEmpty()) {
      return chain.filter(exchange);
    }
    return DataBufferUtils.join(exchange.getRequest().getBody())
        .map(
            buf -> {
              byte[] bytes = new byte[buf.readableByteCount()];
              buf.read(bytes);
              DataBufferUtils.release(buf);
              return bytes;
            })
        .defaultIfEmpty(new byte[0])
        .flatMap(body -> route(exchange, chain, path, body));
  }

  private Mono<Void> route(
      ServerWebExchange exchange, GatewayFilterChain chain, String path, byte[] body) {
    InferenceRequest request =
        InferenceRequest.of(
            InferenceRequest.Api.fromPath(path).get(),
            body,
            Map.copyOf(exchange.getRequest().getHeaders()),
            UUID.randomUUID().toString());
    RouteDecision decision;
    try {
      decision = router.decide(request);
    } catch (ConnectorException e) {
      exchange.getResponse().setStatusCode(HttpStatus.valueOf(e.httpStatus()));
      return exchange
          .getResponse()
          .writeWith(
              Mono.just(
                  exchange
                      .getResponse()
                      .bufferFactory()
                      .wrap(e.getMessage().getBytes(StandardCharsets.UTF_8))));
    }
    URI target = URI.create(decision.decode().baseUrl() + path);
    ServerWebExchange routed =
        exchange
            .mutate()
            .request(
                r ->
                    r.headers(
                        h -> {
                          h.remove("x-prefiller-host-port"); // never trust a client's copy
                          decision.requestHeaders().forEach(h::set);
                        }))
            .build();
    routed.getAttributes().put(ServerWebExchangeUtils.GATEWAY_REQUEST_URL_ATTR, target);
    routed
        .getAttributes()
        .put(
            ServerWebExchangeUtils.CACHED_REQUEST_BODY_ATTR,
            routed.getResponse().bufferFactory().wrap(body));
    decision.responseHeaders().forEach((k, v) -> routed.getResponse().getHeaders().set(k, v));
    long start = System.nanoTime();
    return chain
        .filter(routed)
        .doFinally(
            signal -> {
              HttpStatus status =
                  HttpStatus.resolve(
                      routed.getResponse().getStatusCode() == null
                          ? 200
                          : routed.getResponse().getStatusCode().value());
              RouteDecision.Outcome outcome =
                  switch (signal) {
                    case CANCEL -> RouteDecision.Outcome.CANCELLED;
                    case ON_ERROR -> RouteDecision.Outcome.ENDPOINT_ERROR;
                    default ->
                        status != null && status.is5xxServerError()
                            ? RouteDecision.Outcome.ENDPOINT_ERROR
                            : status != null && status.is4xxClientError()
                                ? RouteDecision.Outcome.CLIENT_ERROR
                                : RouteDecision.Outcome.SUCCESS;
                  };
              decision.complete(outcome, Duration.ofNanos(System.nanoTime() - start), null);
            });
  }
}
