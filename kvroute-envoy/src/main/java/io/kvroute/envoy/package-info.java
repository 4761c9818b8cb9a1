/**
 * kvroute as an Envoy {@code ext_proc} endpoint picker for the Gateway API Inference Extension:
 * {@link io.kvroute.envoy.EndpointPicker} (the service) and {@link io.kvroute.envoy.EppServer} (a
 * gRPC server with health checking). gRPC and Envoy API types appear only in this module.
 */
package io.kvroute.envoy;
