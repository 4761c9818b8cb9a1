/**
 * PD orchestration: a request over ordered (prefill, decode) pairs with one connector, with
 * per-endpoint circuit breakers, a retry budget and {@code Retry-After}; the Micrometer connector
 * listener. Resilience4j is an implementation detail: no type of it appears in this module's API.
 */
module io.kvroute.pd {
  requires transitive io.kvroute.connector;
  requires transitive micrometer.core;
  requires transitive io.kvroute.config;
  requires io.github.resilience4j.circuitbreaker;
  requires io.github.resilience4j.core;

  exports io.kvroute.pd;

  // The config binder binds the kvConnector section into these records.
  opens io.kvroute.pd.internal to
      com.fasterxml.jackson.databind;
}
