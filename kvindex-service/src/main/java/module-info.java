/** {@code kvroute serve}: the KV-cache manager service and its Java client. */
module io.kvroute.service {
  requires transitive io.kvroute.kvindex;
  requires transitive io.kvroute.connector;
  requires transitive micrometer.core;
  requires transitive micrometer.registry.prometheus;
  requires transitive io.kvroute.config;
  requires io.kvroute.edge;
  requires io.kvroute.scoring;
  requires com.fasterxml.jackson.databind;
  requires org.slf4j;

  exports io.kvroute.service;

  // Jackson binds the service's answers into these records (KvIndexClient).
  opens io.kvroute.service to
      com.fasterxml.jackson.databind;
  // The config binder binds serve's configuration file into these records.
  opens io.kvroute.service.internal to
      com.fasterxml.jackson.databind;
}
