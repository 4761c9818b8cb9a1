/**
 * Endpoint discovery from the Kubernetes API ({@link io.kvroute.kubernetes.KubernetesDiscovery}):
 * ready pods by label selector or through an {@code InferencePool}, applied to a {@link
 * io.kvroute.router.KvRouter}. fabric8's jars are automatic modules; its client implementation and
 * HTTP transport ({@code kubernetes.client}, {@code io.fabric8.kubernetes.client.jdkhttp}) are
 * found at run time, so a modular application adds them to the module graph ({@code
 * --add-modules}).
 */
module io.kvroute.kubernetes {
  requires transitive io.kvroute.router;
  requires transitive kubernetes.client.api;
  requires transitive kubernetes.model.core;
  requires transitive micrometer.core;
  requires kubernetes.model.common;
  requires com.fasterxml.jackson.databind;
  requires java.net.http;
  requires org.slf4j;

  exports io.kvroute.kubernetes;
}
