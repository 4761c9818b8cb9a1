package io.kvroute.kvindex.redis.internal;

import static io.kvroute.kvindex.backend.StoreSpan.engineKey;

import io.kvroute.kvindex.backend.PendingBlocks;
import io.kvroute.kvindex.backend.StoreSpan;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.hash.RequestKeyHasher;
import io.kvroute.kvindex.redis.internal.Scripts.Script;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * The write path of one index: request keys are computed here exactly as the in-memory index does
 * ({@link StoreSpan}: same hasher, same engine/index block-size ratios, partial index blocks kept
 * locally); each event becomes one {@link WriteOp} (its part of a {@code write.lua} call) queued
 * for the client's writer thread through {@link Leases}. Parents resolve through the local {@link
 * MappingCache}, else one read.
 *
 * <p><b>Thread-safety.</b> Thread-safe: the caches are thread-safe, each ingesting thread has its
 * own {@link StoreSpan}; one pod's writes must not overlap (as {@link
 * io.kvroute.kvindex.BlockIndex} callers guarantee).
 */
final class Writes extends IndexPart {
  private final Tiers tiers;
  private final Pods pods;
  private final Leases leases;
  private final MappingCache mappings;
  private final FreshMappings fresh;
  private final PendingBlocks partials = new PendingBlocks();
  private final ThreadLocal<StoreSpan> spans;

  /** The layout of the pod whose store this thread is computing (for parent reads). */
  private final ThreadLocal<KeyLayout> current = new ThreadLocal<>();

  Writes(RedisIndexImpl index) {
    super(index);
    this.tiers = index.tiers;
    this.pods = index.pods;
    this.leases = index.leases;
    this.mappings = new MappingCache(rc.mappingCacheSize());
    long ttlMs = rc.mappingTtl().toMillis();
    this.fresh =
        new FreshMappings(
            Math.max(1024, rc.mappingCacheSize() / 4), ttlMs > 0 ? ttlMs / 4 : Long.MAX_VALUE);
    RequestKeyHasher hasher = index.keyHasher();
    this.spans =
        ThreadLocal.withInitial(
            () -> new StoreSpan(hasher, config.blockSize(), counters, partials, this::findParent));
  }

  void blockStored(String podId, KvEvent.BlockStored event) {
    Objects.requireNonNull(event, "event");
    Objects.requireNonNull(podId, "podId");
    long[] engineHashes = Objects.requireNonNull(event.blockHashes().values(), "engineHashes");
    int groupIdx = event.groupIndex();
    counters.eventStored();
    int n = engineHashes.length;
    if (n == 0 || !counters.validGroup(groupIdx, n)) {
      return;
    }
    if (!followed(podId, n)) {
      return;
    }
    KeyLayout keys = index.layout(podId);
    try {
      int pod = pod(podId, true, n);
      if (pod < 0) {
        return;
      }
      int tier = tiers.codeOf(event.medium());
      int[] tokenIds = event.tokenIds();
      if (tokenIds == null || tokenIds.length == 0 || event.blockSize() <= 0) {
        byte[][] k = new byte[1 + n][];
        k[0] = keys.podnKey;
        for (int i = 0; i < n; i++) {
          k[1 + i] = keys.engine(engineKey(engineHashes[i], groupIdx));
        }
        leases.submit(new WriteOp(index, 'T', podId, pod, groupIdx, tier, k, n, 0, null, null));
        return;
      }
      current.set(keys);
      storeWithTokens(keys, podId, pod, engineHashes, event, tier, groupIdx);
    } catch (RedisClientImpl.Unavailable e) {
      counters.dropped("redis_unavailable", n);
    } finally {
      current.remove();
    }
  }

  /**
   * Whether this replica follows the pod's group (else the event is dropped, counted as {@code
   * not_followed}: its followers write it).
   */
  private boolean followed(String podId, int n) {
    if (index.groups.follows(podId)) {
      return true;
    }
    counters.dropped("not_followed", Math.max(1, n));
    return false;
  }

  private void storeWithTokens(
      KeyLayout keys,
      String podName,
      int pod,
      long[] hashes,
      KvEvent.BlockStored event,
      int tier,
      int group) {
    StoreSpan span = spans.get();
    int hashed =
        span.begin(
            hashes,
            event.hasParent(),
            event.parentHash(),
            event.tokenIds(),
            event.blockSize(),
            event.effectiveLoraName(),
            group,
            event.extraKeys());
    if (hashed == 0) {
      return;
    }
    long[] rk = span.keys();
    List<byte[]> rkKeys = new ArrayList<>(hashed);
    List<byte[]> ekKeys = new ArrayList<>(hashed);
    List<byte[]> ekValues = new ArrayList<>(hashed);
    long[] tags = new long[hashed]; // per mapping, its FreshMappings tag
    byte[] flags = new byte[hashed];
    long nowMs = now() / 1_000_000L;
    int lastJ = -1;
    for (int i = 0; i < hashed; i++) {
      if (!span.locate(i)) {
        continue;
      }
      int from = span.from();
      int to = span.to();
      long ek = engineKey(hashes[i], group);
      for (int j = Math.max(from, lastJ + 1); j <= to; j++) {
        rkKeys.add(keys.request(rk[j]));
        lastJ = j;
      }
      byte kind = span.kind();
      byte[] v = new byte[1 + 8 * (to - from + 1)];
      v[0] = kind;
      for (int j = from; j <= to; j++) {
        Bytes.putLong(v, 1 + 8 * (j - from), rk[j]);
      }
      // a mapping this replica rewrote in this group within a quarter of its TTL is left out of
      // the write ('0': written only if its request key was absent, i.e. the server lost it); the
      // others are written ('1'), and recorded once applied if Redis held them already
      int j = ekKeys.size();
      tags[j] = FreshMappings.tag(ek, keys.group, rk[to], kind);
      flags[j] = fresh.fresh(tags[j], nowMs) ? (byte) '0' : (byte) '1';
      ekKeys.add(keys.engine(ek));
      ekValues.add(v);
      mappings.put(ek, rk[to], kind);
      counters.blocksStored(1);
    }
    span.finish();
    if (rkKeys.isEmpty() && ekKeys.isEmpty()) {
      return;
    }
    byte[][] k = new byte[1 + rkKeys.size() + ekKeys.size()][];
    k[0] = keys.podnKey;
    int at = 1;
    for (byte[] b : rkKeys) {
      k[at++] = b;
    }
    for (byte[] b : ekKeys) {
      k[at++] = b;
    }
    byte[][] values = ekValues.toArray(new byte[0][]);
    WriteOp op =
        new WriteOp(
            index, 'S', podName, pod, group, tier, k, rkKeys.size(), ekKeys.size(), values, null);
    op.flags = Arrays.copyOf(flags, ekKeys.size());
    op.tags = tags;
    op.createdMs = nowMs;
    leases.submit(op);
  }

  /**
   * Called by the writer when a store was applied: records the mappings it rewrote ({@code reply}'s
   * last element: one byte per mapping, {@code 1} if Redis held it already).
   */
  void applied(WriteOp op, List<Object> reply) {
    if (op.kind != 'S' || op.tags == null || reply.size() < 6) {
      return;
    }
    byte[] held = (byte[]) reply.get(5);
    for (int j = 0; j < op.m && j < held.length; j++) {
      if (held[j] == '1') {
        fresh.rewritten(op.tags[j], op.createdMs);
      }
    }
  }

  /** The server may have lost what this replica wrote (it restarted): write every mapping again. */
  void forgetWrites() {
    fresh.clear();
  }

  /** A parent's mapping: from the local cache, else read (see {@link StoreSpan.Mappings}). */
  private int findParent(long ek, long[] out) {
    int kind = mappings.get(ek, out);
    return kind >= 0 ? kind : readMapping(ek, out);
  }

  /**
   * Reads a mapping another replica (or an earlier life of this one) wrote, in the group of the pod
   * whose event is being stored.
   */
  private int readMapping(long ek, long[] out) {
    // our own mapping may still be queued: let the writer catch up first
    client.flush(client.submittedSeq());
    KeyLayout keys = current.get();
    if (keys == null) {
      keys = index.keys;
    }
    byte[] key = keys.engine(ek);
    byte[] v = client.call(c -> c.get(key), rc.commandTimeout(), "read");
    if (v == null || v.length < 9) {
      return -1;
    }
    out[0] = Bytes.getLong(v, v.length - 8);
    mappings.put(ek, out[0], v[0]);
    return v[0];
  }

  void blockRemoved(String podId, KvEvent.BlockRemoved event) {
    Objects.requireNonNull(podId, "podId");
    long[] engineHashes = event.blockHashes().values();
    int groupIdx = event.groupIndex();
    counters.eventRemoved();
    int n = engineHashes.length;
    if (!counters.validGroup(groupIdx, n)) {
      return;
    }
    if (n > 0 && !followed(podId, n)) {
      return;
    }
    KeyLayout keys = index.layout(podId);
    try {
      int pod = pod(podId, false, n);
      if (pod < 0) {
        return;
      }
      if (n == 0) {
        return;
      }
      int tier = tiers.codeOf(event.medium());
      byte[][] k = new byte[1 + n][];
      k[0] = keys.podnKey;
      boolean[] partial = new boolean[n];
      // a block whose mapping names one request key and is cached is removed from that key
      // directly ('r'); the script resolves the others ('e': engine key)
      byte[] flags = new byte[n];
      long[] out = new long[1];
      for (int i = 0; i < n; i++) {
        long ek = engineKey(engineHashes[i], groupIdx);
        int kind = mappings.get(ek, out);
        if (kind == StoreSpan.BOUNDARY || kind == StoreSpan.MID) {
          k[1 + i] = keys.request(out[0]);
          flags[i] = 'r';
        } else {
          k[1 + i] = keys.engine(ek);
          flags[i] = 'e';
          partial[i] = partials.contains(ek);
        }
      }
      WriteOp op = new WriteOp(index, 'R', podId, pod, groupIdx, tier, k, n, 0, null, partial);
      op.flags = flags;
      leases.submit(op);
    } catch (RedisClientImpl.Unavailable e) {
      counters.dropped("redis_unavailable", n);
    }
  }

  void allBlocksCleared(String podId) {
    Objects.requireNonNull(podId, "podId");
    counters.eventCleared();
    if (!followed(podId, 1)) {
      return;
    }
    try {
      int pod = pods.id(podId, false);
      if (pod >= 0) {
        leases.submit(new WriteOp(index, 'C', podId, pod, 0, 0, podnOnly(podId), 0, 0, null, null));
      }
    } catch (RedisClientImpl.Unavailable e) {
      counters.dropped("redis_unavailable", 1);
    }
  }

  void removePod(String podId) {
    Objects.requireNonNull(podId, "podId");
    counters.eventPodRemoved();
    try {
      int pod = pods.id(podId, false);
      if (pod < 0) {
        return;
      }
      Leases.Lease l = leases.detach(podId);
      WriteOp op = new WriteOp(index, 'X', podId, pod, 0, 0, podnOnly(podId), 0, 0, null, null);
      if (!client.submit(op)) { // unfenced: any replica may remove a pod
        op.dropped("queue_full");
      }
      // applied before anything else may register the name again
      client.flush(op.seq);
      pods.forget(podId);
      if (l != null) {
        leases.release(l, podId, pod);
      }
    } catch (RedisClientImpl.Unavailable e) {
      counters.dropped("redis_unavailable", 1);
    }
  }

  /**
   * The pod's id, registered if {@code create}; -1 if unknown or no room, its {@code n} blocks then
   * counted as dropped.
   */
  private int pod(String podId, boolean create, int n) {
    int pod = pods.id(podId, create);
    if (pod < 0) {
      counters.dropped(create ? "max_pods" : "unknown_pod", n);
    }
    return pod;
  }

  private byte[][] podnOnly(String podId) {
    return new byte[][] {index.layout(podId).podnKey};
  }

  /** Called by the writer for a reply with status 1: the pod was not registered under its id. */
  boolean reRegister(WriteOp op) {
    forgetWrites(); // the registry was lost: so, probably, were the mappings
    int id = pods.register(op.podName);
    if (id < 0) {
      return false;
    }
    op.pod = id;
    return true;
  }

  /** Counts what the script reports for an applied op. */
  void counted(char kind, List<Object> reply, boolean[] partial) {
    if (kind == 'S' || kind == 'T') {
      long evicted = Bytes.parseLong(reply.get(2));
      if (evicted > 0) {
        counters.evicted("max_pods_per_key", evicted);
      }
      if (kind == 'T') {
        counters.blocksStored(Bytes.parseLong(reply.get(3)));
        counters.dropped("unknown_engine_key", reply.size() - 5);
      }
    } else if (kind == 'R') {
      counters.blocksRemoved(Bytes.parseLong(reply.get(1)));
      for (int i = 5; i < reply.size(); i++) {
        int idx = (int) Bytes.parseLong(reply.get(i));
        if (partial == null || !partial[idx]) {
          counters.dropped("unknown_engine_key", 1);
        }
      }
    }
  }

  /** One {@code write.lua} call applying {@code ops} (all of this index and group) in order. */
  RedisFuture<List<Object>> dispatch(
      RedisClusterAsyncCommands<byte[], byte[]> c, List<WriteOp> ops) {
    KeyLayout keys = index.layouts[ops.get(0).pg];
    int nk = 1;
    int na = 5;
    for (WriteOp op : ops) {
      nk += op.keys.length - 1;
      na += 9 + op.m;
    }
    byte[][] k = new byte[nk][];
    byte[][] args = new byte[na][];
    k[0] = keys.podnKey;
    args[0] = keys.prefix;
    args[1] = keys.entryTtl;
    args[2] = keys.mappingTtl;
    args[3] = keys.maxEntries;
    args[4] = Bytes.num(ops.size());
    int at = 1;
    int a = 5;
    for (WriteOp op : ops) {
      System.arraycopy(op.keys, 1, k, at, op.keys.length - 1);
      at += op.keys.length - 1;
      args[a++] = new byte[] {(byte) op.kind};
      args[a++] = Bytes.num(op.pod);
      args[a++] = Bytes.utf8(op.podName);
      args[a++] = Bytes.num(op.group);
      args[a++] = Bytes.num(op.tier);
      args[a++] = op.tokenArg();
      args[a++] = Bytes.num(op.n);
      args[a++] = Bytes.num(op.m);
      args[a++] = op.flags;
      for (int j = 0; j < op.m; j++) {
        args[a++] = op.values[j];
      }
    }
    return client.scripts.call(c, Script.WRITE, ScriptOutputType.MULTI, k, args);
  }
}
