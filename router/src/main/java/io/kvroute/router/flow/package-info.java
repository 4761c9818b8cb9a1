/**
 * Flow control: admission before scheduling. Priority bands with bounds, TTLs and eviction,
 * fairness between tenants, a saturation detector from the engines' metrics and the router's
 * in-flight load, and a latency rule on requests with an objective ({@link
 * io.kvroute.router.flow.SloGate}). {@link io.kvroute.router.KvRouter} runs it when built with
 * {@code flowControl}; the fleet simulator ({@code kvroute replay}) drives the same {@link
 * io.kvroute.router.flow.FlowController} in virtual time.
 */
package io.kvroute.router.flow;
