/** {@link io.kvroute.router.KvRouter}: the facade a gateway embeds. */
module io.kvroute.router {
  requires transitive io.kvroute.connector;
  requires transitive io.kvroute.pd;
  requires transitive io.kvroute.scoring;
  requires transitive io.kvroute.kvindex;
  requires io.kvroute.connector.http;
  requires transitive micrometer.core;
  requires com.fasterxml.jackson.databind;
  requires org.slf4j;

  exports io.kvroute.router;
  exports io.kvroute.router.flow;
}
