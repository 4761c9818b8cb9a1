/**
 * {@code kvroute replay}: a trace or workload shape through a simulated vLLM fleet in virtual time,
 * routed by kvroute's own decision path, once per routing {@link io.kvroute.replay.Strategy}.
 *
 * <p>Start at {@link io.kvroute.replay.Replay}; workloads come from {@link
 * io.kvroute.replay.Workload}; results are a {@link io.kvroute.replay.ReplayReport}.
 */
package io.kvroute.replay;
