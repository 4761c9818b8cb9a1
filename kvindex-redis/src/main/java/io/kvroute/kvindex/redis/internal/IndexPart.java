package io.kvroute.kvindex.redis.internal;

import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.backend.IndexCounters;
import io.kvroute.kvindex.redis.RedisIndexConfig;

/**
 * What every part of one {@link RedisIndexImpl} shares: the index, its client and configurations,
 * its key layout and counters. Parts are built last by the index's constructor, from these fields
 * already set. Immutable (the shared objects are thread-safe).
 */
abstract class IndexPart {
  final RedisIndexImpl index;
  final RedisClientImpl client;
  final RedisIndexConfig rc;
  final IndexConfig config;
  final KeyLayout keys;
  final IndexCounters counters;

  IndexPart(RedisIndexImpl index) {
    this.index = index;
    this.client = index.client;
    this.rc = client.config;
    this.config = index.config();
    this.keys = index.keys;
    this.counters = index.counters;
  }

  /** The configured clock's time. */
  final long now() {
    return rc.nanoClock().getAsLong();
  }
}
