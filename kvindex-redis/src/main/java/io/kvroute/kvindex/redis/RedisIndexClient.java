package io.kvroute.kvindex.redis;

import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.fleet.FleetConfig;
import io.kvroute.kvindex.fleet.FleetState;
import io.kvroute.kvindex.redis.internal.RedisClientImpl;

/**
 * Connections to one Redis (or Valkey) server, or one Redis Cluster, shared by the block indexes of
 * several models and the fleet state of the gateway replicas: one connection for lookups, registry
 * reads and the fleet state, one pipelined connection and one writer thread for all indexes' writes
 * (plus one writer thread per fleet).
 *
 * <p><b>Never fails requests.</b> If the server is unreachable when the client starts, or later,
 * lookups answer "no cache information" (every pod matched 0 blocks), writes are dropped, both
 * counted ({@code kvroute_kvindex_redis_unavailable_total}) and logged once per outage; the client
 * reconnects in the background and the indexes resume by themselves.
 *
 * <p><b>Thread-safety.</b> Thread-safe. {@link #close()} closes every index it created.
 */
public interface RedisIndexClient extends AutoCloseable {

  /**
   * Creates a client and starts connecting (returns even if the server is not reachable yet).
   *
   * @throws IllegalArgumentException if the URL cannot be parsed
   */
  static RedisIndexClient connect(RedisIndexConfig config) {
    return new RedisClientImpl(config);
  }

  /**
   * The index of {@code config.modelName()} (namespace: the model name, or {@code default} when
   * empty).
   */
  RedisBlockIndex index(IndexConfig config);

  /**
   * The index in {@code namespace}: its keys are tagged {@code {keyPrefix:namespace}}, so they all
   * live in one Redis Cluster slot. Replicas that share an index use the same namespace, block size
   * and hash seed.
   */
  RedisBlockIndex index(IndexConfig config, String namespace);

  /**
   * This replica's handle on the state the gateway replicas of {@code config.fleet()} share in this
   * Redis: in-flight requests and tokens per endpoint (leased: a replica that dies leaves the view
   * within {@link FleetConfig#leaseTtl()}), and speculative prefix entries. Views answer within
   * {@link FleetConfig#viewTimeout()}, from the local view when Redis is slow or down. All the
   * fleet's keys carry the hash tag {@code {keyPrefix:fleet:<fleet>}} (one Cluster slot). Closed
   * with the client; closing it withdraws its counts at once.
   *
   * @throws IllegalStateException if the client is closed
   */
  FleetState fleet(FleetConfig config);

  /** Whether the server answered the last command. */
  boolean available();

  /** The configuration. */
  RedisIndexConfig config();

  /** Stops the writer (after a bounded wait for pending writes) and closes the connections. */
  @Override
  void close();
}
