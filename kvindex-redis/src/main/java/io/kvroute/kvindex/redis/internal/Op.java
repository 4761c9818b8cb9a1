package io.kvroute.kvindex.redis.internal;

import io.lettuce.core.RedisFuture;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import java.util.List;

/**
 * One queued write: an event's script call, built on the ingesting thread, sent by the writer
 * thread. Confined to one thread at a time (handed over through the queue).
 */
abstract class Op {
  final RedisIndexImpl index;
  long seq;

  Op(RedisIndexImpl index) {
    this.index = index;
  }

  /** Sends the command (not flushed). */
  abstract RedisFuture<List<Object>> dispatch(RedisClusterAsyncCommands<byte[], byte[]> c);

  /** Handles the reply; returns false if the op must be sent again (its pod was re-registered). */
  abstract boolean done(List<Object> reply);

  /** The op could not be applied (server unreachable, queue full, ...). */
  abstract void dropped(String reason);
}
