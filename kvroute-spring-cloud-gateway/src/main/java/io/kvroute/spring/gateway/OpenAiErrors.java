package io.kvroute.spring.gateway;

import io.kvroute.router.FailureAnswer;
import java.util.Optional;
import org.springframework.http.HttpStatusCode;
import org.springframework.http.server.reactive.ServerHttpResponse;
import org.springframework.web.server.ServerWebExchange;
import reactor.core.publisher.Mono;

/**
 * Writes kvroute's answer to a failed request ({@link FailureAnswer}: the one table the CLI gateway
 * and the Envoy picker use too) as the exchange's response: status, {@code Retry-After},
 * OpenAI-style JSON body.
 */
final class OpenAiErrors {
  private OpenAiErrors() {}

  /**
   * Writes the answer to {@code failure}; nothing when the request was cancelled (the client is
   * gone).
   */
  static Mono<Void> write(ServerWebExchange exchange, Throwable failure) {
    Optional<FailureAnswer> answer = FailureAnswer.of(failure);
    return answer.isEmpty() ? Mono.empty() : write(exchange, answer.get());
  }

  /** Writes {@code answer} as the exchange's response. */
  static Mono<Void> write(ServerWebExchange exchange, FailureAnswer answer) {
    ServerHttpResponse r = exchange.getResponse();
    r.setStatusCode(HttpStatusCode.valueOf(answer.status()));
    answer.headers().forEach(r.getHeaders()::set);
    byte[] b = answer.body();
    r.getHeaders().setContentLength(b.length);
    return r.writeWith(Mono.just(r.bufferFactory().wrap(b)));
  }
}
