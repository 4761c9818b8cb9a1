/**
 * An in-process vLLM simulator for tests and demos: {@link io.kvroute.testkit.VllmSimulator} (one
 * pod: OpenAI endpoints with vLLM's SSE framing, {@code /tokenize}, Prometheus {@code /metrics}, a
 * vLLM-exact prefix-cache block pool, a real JeroMQ KV-event publisher with replay, PD roles, fault
 * injection), {@link io.kvroute.testkit.SimulatedCluster} (N prefill/decode/both pods) and {@link
 * io.kvroute.testkit.SimulatedClusterExtension} (one cluster per JUnit 5 test class).
 *
 * <p>Everything binds loopback ephemeral ports by default; {@link
 * io.kvroute.testkit.LatencyModel#ZERO} with {@link io.kvroute.testkit.Sleeper#NONE} makes tests
 * independent of wall-clock speed.
 */
package io.kvroute.testkit;
