/**
 * kvroute's composition root: one settings record ({@link io.kvroute.assembly.RouterSettings}) and
 * the router, index and discovery built from it ({@link io.kvroute.assembly.RouterAssembly}). The
 * Redis index, Kubernetes and P2pNccl discovery, local tokenizers and tracing are optional: their
 * modules are needed only when their settings are given, and a modular application adds them with
 * {@code --add-modules}.
 */
module io.kvroute.assembly {
  requires transitive io.kvroute.router;
  requires transitive io.kvroute.config;
  requires transitive micrometer.core;
  requires static io.kvroute.kvindex.redis;
  requires static io.kvroute.kubernetes;
  requires static io.kvroute.tokenizer.hf;
  requires static io.kvroute.opentelemetry;
  requires static transitive io.kvroute.connector.p2pnccl;
  requires static io.kvroute.connector.sidecar;
  requires static io.opentelemetry.api;
  requires org.slf4j;

  exports io.kvroute.assembly;

  opens io.kvroute.assembly to
      com.fasterxml.jackson.databind;
}
