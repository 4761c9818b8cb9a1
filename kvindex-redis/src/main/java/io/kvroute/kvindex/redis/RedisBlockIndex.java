package io.kvroute.kvindex.redis;

import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import java.util.Set;

/**
 * A {@link BlockIndex} stored in Redis or Valkey and shared by every gateway replica that uses the
 * same server and namespace (key layout: this module's README).
 *
 * <p><b>Writes</b> are queued (bounded) and sent in pipelined batches by the client's writer
 * thread; each event is one Lua script call that applies it atomically and idempotently. A store's
 * request keys are chained from its parent's request key, resolved from a local cache of the
 * mappings this replica wrote (else one read). <b>Lookups</b> cost one round trip for a whole
 * prompt. A replica that starts against a warm server routes precisely from its first lookup.
 *
 * <p><b>Consistency.</b> Another replica's writes are visible as soon as Redis applied them; this
 * replica's own are visible once flushed (at most one batch later; {@link #flush()} waits;
 * introspection methods flush first; lookups too with {@code readYourWrites}). {@link
 * #allBlocksCleared} and {@link #removePod} are O(1): they advance the pod's epoch, which
 * invalidates its entries at once; the bytes go when their keys are next written, expire or are
 * evicted, so {@link io.kvroute.kvindex.IndexStats#keys()} may count keys left with invalid entries
 * only.
 *
 * <p><b>Thread-safety.</b> Thread-safe, as {@link BlockIndex} requires.
 */
public interface RedisBlockIndex extends BlockIndex, AutoCloseable {

  /**
   * An index with its own client (closed with the index).
   *
   * @see RedisIndexClient#index(IndexConfig)
   */
  static RedisBlockIndex create(IndexConfig config, RedisIndexConfig redis) {
    RedisIndexClient client = RedisIndexClient.connect(redis);
    return ((io.kvroute.kvindex.redis.internal.RedisClientImpl) client).ownedIndex(config, null);
  }

  /** The namespace (the hash tag is {@code {keyPrefix:namespace}}). */
  String namespace();

  /**
   * The hash tag of {@code podId}'s keys (its pod group's; see {@link
   * RedisIndexConfig#podGroups()}): {@code redis-cli cluster keyslot <tag>} tells its slot, so its
   * shard.
   */
  String hashTag(String podId);

  /** Waits (bounded by the command timeout) until this index's queued writes were applied. */
  void flush();

  /** Whether the server answered the last command. */
  boolean available();

  /**
   * Pods whose events this replica writes (under {@link RedisIndexConfig.IngestMode#LEASED}: the
   * pods whose lease it holds; else every pod it received events from).
   */
  Set<String> ownedPods();

  /** Detaches the index from its client (closing the client if the index owns it). */
  @Override
  void close();
}
