/**
 * Endpoint discovery from the Kubernetes API: {@link io.kvroute.kubernetes.KubernetesDiscovery}
 * watches ready pods (by label selector or through an {@code InferencePool}) and applies them to an
 * {@link io.kvroute.kubernetes.EndpointSink} such as a {@link io.kvroute.router.KvRouter}.
 */
package io.kvroute.kubernetes;
