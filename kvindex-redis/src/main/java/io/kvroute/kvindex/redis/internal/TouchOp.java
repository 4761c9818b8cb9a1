package io.kvroute.kvindex.redis.internal;

import io.kvroute.kvindex.redis.internal.Scripts.Script;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import java.util.List;

/**
 * TTL refresh of matched keys ({@code touch.lua}, best effort). Confined to one thread at a time
 * (handed over through the write queue).
 */
final class TouchOp extends Op {
  final byte[][] keys;
  final byte[] ttl;

  TouchOp(RedisIndexImpl index, byte[][] keys, byte[] ttl) {
    super(index);
    this.keys = keys;
    this.ttl = ttl;
  }

  @Override
  RedisFuture<List<Object>> dispatch(RedisClusterAsyncCommands<byte[], byte[]> c) {
    return index.client.scripts.call(c, Script.TOUCH, ScriptOutputType.MULTI, keys, ttl);
  }

  @Override
  boolean done(List<Object> reply) {
    return true;
  }

  @Override
  void dropped(String reason) {}
}
