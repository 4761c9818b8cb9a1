package io.kvroute.kvindex.redis.internal;

import io.lettuce.core.RedisFuture;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import java.util.List;

/**
 * One event's part of a {@code write.lua} call: its kind ({@code S} store, {@code T} tier update,
 * {@code R} remove, {@code C} clear, {@code X} pod removal), the pod, the keys it touches and the
 * values it writes. Confined to one thread at a time (handed over through the write queue, or
 * guarded by its pod's lease while in a backlog).
 */
final class WriteOp extends Op {
  private static final byte[] EMPTY = new byte[0];

  final char kind;
  final String podName;

  /** The pod's group (its keys' hash tag). */
  final int pg;

  int pod;
  final int group;
  final int tier;
  final byte[][] keys;
  final int n;
  final int m;
  final byte[][] values;
  final boolean[] partial;
  byte[] token = EMPTY;
  long born;

  /**
   * Per op kind: a store's mappings, {@code 1} written, {@code 0} written only if the request key
   * it names was absent (this replica wrote it recently); a removal's keys, {@code r} a request key
   * (resolved from the local mapping cache), {@code e} an engine key (resolved by the script).
   */
  byte[] flags = EMPTY;

  /** A store's mappings' {@link FreshMappings} tags. */
  long[] tags;

  /** When a store was built (ms of the index's clock): its mappings were written no earlier. */
  long createdMs;

  WriteOp(
      RedisIndexImpl index,
      char kind,
      String podName,
      int pod,
      int group,
      int tier,
      byte[][] keys,
      int n,
      int m,
      byte[][] values,
      boolean[] partial) {
    super(index);
    this.kind = kind;
    this.podName = podName;
    this.pg = index.groups.group(podName);
    this.pod = pod;
    this.group = group;
    this.tier = tier;
    this.keys = keys;
    this.n = n;
    this.m = m;
    this.values = values;
    this.partial = partial;
  }

  /** The token argument of the script: none for a pod removal (any replica may remove a pod). */
  byte[] tokenArg() {
    return kind == 'X' || token == null ? EMPTY : token;
  }

  @Override
  RedisFuture<List<Object>> dispatch(RedisClusterAsyncCommands<byte[], byte[]> c) {
    return index.dispatchWrites(c, List.of(this));
  }

  @Override
  boolean done(List<Object> reply) {
    long status = Bytes.parseLong(reply.get(0));
    if (status == 1) {
      return !index.writes.reRegister(this) ? dropAndTrue("unknown_pod") : false;
    }
    if (status == 2) {
      index.leases.fenced(this);
      return true;
    }
    index.writes.counted(kind, reply, partial);
    index.writes.applied(this, reply);
    return true;
  }

  private boolean dropAndTrue(String reason) {
    dropped(reason);
    return true;
  }

  @Override
  void dropped(String reason) {
    int blocks = kind == 'S' ? Math.max(1, m) : kind == 'C' || kind == 'X' ? 1 : n;
    if (reason.equals("unknown_pod") && (kind == 'C' || kind == 'X')) {
      return; // the pod is gone already
    }
    index.counters.dropped(reason, blocks);
  }
}
