package io.kvroute.spring.gateway;

import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.cloud.gateway.route.RouteLocator;
import org.springframework.cloud.gateway.route.builder.RouteLocatorBuilder;
import org.springframework.context.annotation.Bean;

/**
 * A Spring Cloud Gateway application as a user writes one: a route for the OpenAI paths, and the
 * kvroute starter on the class path. The route's URI is a port nothing listens on, so a request
 * that kvroute did not route fails loudly.
 */
@SpringBootApplication
public class GatewayTestApp {
  /** Where the route points before kvroute replaces it (the discard port: nothing answers). */
  static final String UNROUTED = "http://127.0.0.1:9";

  @Bean
  RouteLocator routes(RouteLocatorBuilder builder) {
    return builder.routes().route("openai", r -> r.path("/v1/**").uri(UNROUTED)).build();
  }
}
