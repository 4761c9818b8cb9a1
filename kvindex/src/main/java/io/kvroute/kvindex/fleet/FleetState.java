package io.kvroute.kvindex.fleet;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * One gateway replica's handle on the state the replicas of a fleet share, so that R replicas route
 * as well as one: the requests and tokens in flight per endpoint, speculative prefix entries ("this
 * replica just sent a request with request keys K to endpoint E"), visible to every replica before
 * the engine's KV events confirm them, and the routing memory ("this replica sent a prompt with
 * approximate prefix hashes H to endpoint E", {@link #remember}): the router's own record of where
 * prompts went, which the approximate prefix scorer reads, kept {@link FleetConfig#memoryTtl()}.
 *
 * <p>Implementations: {@link #local(FleetConfig)} (one process: nothing shared), {@link
 * InMemoryFleet} (several replicas in one process, such as the fleet replay, with a modelled
 * staleness), and the Redis/Valkey one in {@code kvindex-redis} ({@code
 * RedisIndexClient.fleet(config)}), which every gateway process of a fleet points at.
 *
 * <p><b>How a router uses it.</b> When a request is sent: {@link #requestStarted}, {@link
 * #speculate} with its request keys, {@link #remember} with its approximate prefix hashes and, if
 * no candidate held any of its prefix, {@link #coldRouted}; when it ends, whatever the outcome:
 * {@link #requestFinished} with the same endpoint and tokens. When scheduling: one {@link #view}
 * per cycle for the candidate endpoints, the request's keys and its hashes; the load scorers read
 * its in-flight counts, the precise prefix scorer takes {@code max(precise match,
 * speculativeBlocks)}, the approximate one {@code max(own memory's match, rememberedBlocks)}, the
 * no-hit LRU scorer orders endpoints by {@code lastColdRouted}.
 *
 * <p><b>Staleness.</b> What one replica records is visible to the others after the store's
 * propagation: at once in one process ({@link InMemoryFleet}, or its modelled {@code
 * visibilityDelay}); on Redis, the writer's acknowledgement ({@code kvroute.fleet.write.latency})
 * plus the reader's round trip. A replica's own records are in its views at once.
 *
 * <p><b>Counts and leases.</b> Each replica publishes its own counts; the fleet view is the sum
 * over live replicas. A replica that stops heartbeating (killed, partitioned) leaves the view at
 * most {@link FleetConfig#leaseTtl()} after its last heartbeat: no leaked counts. A replica's own
 * counts are always exact in its views; other replicas' are as stale as the store's propagation
 * (stated and measured per implementation).
 *
 * <p><b>Deadline.</b> {@link #view} returns within {@link FleetConfig#viewTimeout()} (plus the
 * local computation): if the store is slow or down, it answers from the local view ({@link
 * FleetView.Source#LOCAL}) and counts it ({@code kvroute.fleet.views{source}}). Writes never block
 * the caller: they are queued (bounded) or coalesced.
 *
 * <p><b>Thread-safety.</b> Implementations are thread-safe.
 */
public interface FleetState extends AutoCloseable {

  /**
   * A fleet of one: this process's own counts and speculative entries, nothing shared. Every view
   * is {@link FleetView.Source#FLEET} (the fleet is this replica).
   */
  static FleetState local(FleetConfig config) {
    return InMemoryFleet.builder()
        .nanoClock(config.nanoClock())
        .maxSpeculativeEntries(config.maxSpeculativeEntries())
        .maxMemoryEntries(config.maxMemoryEntries())
        .build()
        .join(config);
  }

  /** This replica's name. */
  String replicaId();

  /** The configuration. */
  FleetConfig config();

  /** Counts a request sent to {@code endpointId} carrying {@code tokens} tokens (≥ 0). */
  void requestStarted(String endpointId, long tokens);

  /**
   * Counts the end of a request counted by {@link #requestStarted} (same endpoint and tokens);
   * counts never go below zero.
   */
  void requestFinished(String endpointId, long tokens);

  /**
   * Records that this replica just sent a request whose prompt has request keys {@code
   * requestKeys[0..numKeys)} (the index's chained keys) to {@code endpointId}: for {@link
   * FleetConfig#speculativeTtl()}, every replica's views count that prefix as held there.
   */
  void speculate(String endpointId, long[] requestKeys, int numKeys);

  /**
   * Records that this replica sent a request whose prompt has the approximate prefix hashes {@code
   * prefixHashes[0..numHashes)} (chained: each covers the prefix before it) to {@code endpointId}:
   * for {@link FleetConfig#memoryTtl()}, every replica's views count that prefix as sent there
   * ({@link FleetView#rememberedBlocks}). Matched by the same checkpoint rule as {@link #speculate}
   * (its stride), kept apart from the speculative entries. An implementation that shares no routing
   * memory ignores it (the default).
   */
  default void remember(String endpointId, long[] prefixHashes, int numHashes) {}

  /**
   * Records that this replica just sent a cold request (one that no candidate held any prefix of)
   * to {@code endpointId}, so that every replica's no-hit LRU scorer spreads cold requests over the
   * endpoints that got one least recently fleet-wide ({@link FleetView#lastColdRouted}). Kept per
   * endpoint (bounded by {@link FleetConfig#maxEndpoints()}) until {@link #removeEndpoint}. An
   * implementation that shares no cold routing ignores it (the default).
   */
  default void coldRouted(String endpointId) {}

  /**
   * The fleet-wide view of {@code endpointIds} for a request with keys {@code
   * requestKeys[0..numKeys)} ({@code numKeys} 0: in-flight counts only), within {@link
   * FleetConfig#viewTimeout()}; else the local view. Never throws for an unreachable store. Its
   * {@link FleetView#rememberedBlocks} are 0.
   */
  FleetView view(List<String> endpointIds, long[] requestKeys, int numKeys);

  /**
   * {@link #view(List, long[], int)} that also matches the request's approximate prefix hashes
   * {@code prefixHashes[0..numHashes)} against the routing memory ({@link
   * FleetView#rememberedBlocks}), in the same read. The default ignores the hashes.
   */
  default FleetView view(
      List<String> endpointIds,
      long[] requestKeys,
      int numKeys,
      long[] prefixHashes,
      int numHashes) {
    return view(endpointIds, requestKeys, numKeys);
  }

  /**
   * {@link #view} without blocking: the future completes (never exceptionally for an unreachable
   * store) within the view timeout, with the local view if the store did not answer.
   */
  default CompletableFuture<FleetView> viewAsync(
      List<String> endpointIds, long[] requestKeys, int numKeys) {
    return CompletableFuture.completedFuture(view(endpointIds, requestKeys, numKeys));
  }

  /**
   * {@link #view(List, long[], int, long[], int)} without blocking, as {@link #viewAsync(List,
   * long[], int)}.
   */
  default CompletableFuture<FleetView> viewAsync(
      List<String> endpointIds,
      long[] requestKeys,
      int numKeys,
      long[] prefixHashes,
      int numHashes) {
    return CompletableFuture.completedFuture(
        view(endpointIds, requestKeys, numKeys, prefixHashes, numHashes));
  }

  /** This replica's own counts and speculative entries (what {@link #view} falls back to). */
  FleetView localView(List<String> endpointIds, long[] requestKeys, int numKeys);

  /**
   * This replica's own counts, speculative entries and routing memory (what {@link #view(List,
   * long[], int, long[], int)} falls back to). The default ignores the hashes.
   */
  default FleetView localView(
      List<String> endpointIds,
      long[] requestKeys,
      int numKeys,
      long[] prefixHashes,
      int numHashes) {
    return localView(endpointIds, requestKeys, numKeys);
  }

  /**
   * Forgets an endpoint that left the pool: this replica's counts, entries and routing memory for
   * it.
   */
  void removeEndpoint(String endpointId);

  /**
   * Waits, at most {@code timeout}, until what this replica recorded so far was sent to the shared
   * store and acknowledged (no-op where nothing is sent). Returns whether it was.
   */
  boolean flush(Duration timeout);

  /** Whether the last exchange with the shared store succeeded (always true in memory). */
  boolean available();

  /**
   * Leaves the fleet: this replica's counts are withdrawn from the view at once (a replica that
   * dies without closing leaves at the end of its lease). Its speculative entries and routing
   * memory expire with their TTLs.
   */
  @Override
  void close();
}
