package io.kvroute.spring.gateway;

import com.fasterxml.jackson.core.io.JsonStringEncoder;
import io.kvroute.connector.ConnectorException;
import java.nio.charset.StandardCharsets;
import org.springframework.http.HttpStatusCode;
import org.springframework.http.MediaType;
import org.springframework.http.server.reactive.ServerHttpResponse;
import org.springframework.web.server.ServerWebExchange;
import reactor.core.publisher.Mono;

/** OpenAI-style error responses: {@code {"error":{"message":...,"type":...,"code":...}}}. */
final class OpenAiErrors {
  private OpenAiErrors() {}

  /** The error type of a kvroute failure. */
  static String type(ConnectorException e) {
    if (e instanceof ConnectorException.InvalidRequestException) {
      return "invalid_request_error";
    }
    int status = e.httpStatus();
    if (status == 429) {
      return "rate_limit_error";
    }
    if (status >= 400 && status < 500) {
      return "invalid_request_error";
    }
    return status == 503 ? "service_unavailable" : "upstream_error";
  }

  /** The JSON body. */
  static String body(int status, String message, String type) {
    return "{\"error\":{\"message\":\""
        + new String(JsonStringEncoder.getInstance().quoteAsString(String.valueOf(message)))
        + "\",\"type\":\""
        + type
        + "\",\"code\":"
        + status
        + "}}";
  }

  /** Writes the error as the exchange's response. */
  static Mono<Void> write(ServerWebExchange exchange, int status, String message, String type) {
    ServerHttpResponse r = exchange.getResponse();
    r.setStatusCode(HttpStatusCode.valueOf(status));
    r.getHeaders().setContentType(MediaType.APPLICATION_JSON);
    byte[] b = body(status, message, type).getBytes(StandardCharsets.UTF_8);
    r.getHeaders().setContentLength(b.length);
    return r.writeWith(Mono.just(r.bufferFactory().wrap(b)));
  }
}
