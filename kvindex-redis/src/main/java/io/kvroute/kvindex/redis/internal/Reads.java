package io.kvroute.kvindex.redis.internal;

import static io.kvroute.kvindex.redis.internal.Tiers.MAX_TIERS;

import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.internal.MatchWriter;
import io.kvroute.kvindex.redis.RedisIndexConfig.LookupMode;
import io.kvroute.kvindex.redis.internal.Scripts.Script;
import io.lettuce.core.KeyValue;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.LongAdder;

/**
 * The read path of one index: one round trip fetches the candidate pods' epochs and the prompt's
 * request keys in order ({@code lookup.lua}, or pipelined {@code HMGET} + {@code MGET}), then the
 * same longest-prefix scan as the in-memory index runs over the returned 8-byte entries. Matched
 * keys have their TTL refreshed (queued, at most once per quarter TTL per key).
 *
 * <p><b>Thread-safety.</b> Thread-safe: per-thread scratch; the touch table is guarded by its
 * monitor; counters are adders.
 */
final class Reads extends IndexPart {
  private final Tiers tiers;
  private final Pods pods;
  private final MatchWriter matchWriter = MatchWriter.get();
  private final ThreadLocal<Scratch> scratch = ThreadLocal.withInitial(Scratch::new);
  private final long[] touchedKeys = new long[4096];
  private final long[] touchedAt = new long[4096];
  final LongAdder degraded = new LongAdder();
  final LongAdder partial = new LongAdder();

  Reads(RedisIndexImpl index) {
    super(index);
    this.tiers = index.tiers;
    this.pods = index.pods;
  }

  PrefixMatch lookup(long[] requestKeys, int numKeys, List<String> candidates, PrefixMatch into) {
    Objects.requireNonNull(requestKeys, "requestKeys");
    Objects.requireNonNull(candidates, "podIds");
    Objects.requireNonNull(into, "into");
    Objects.checkFromIndexSize(0, numKeys, requestKeys.length);
    counters.lookups().increment();
    if (rc.readYourWrites()) {
      client.flush(client.submittedSeq());
    }
    int podCount = candidates.size();
    clear(into, numKeys, candidates);
    if (numKeys == 0 || podCount == 0) {
      return into;
    }
    try {
      lookupInto(requestKeys, numKeys, candidates, into);
    } catch (RedisClientImpl.Unavailable e) {
      degraded.increment();
      clear(into, numKeys, candidates);
    }
    return into;
  }

  /** Every candidate with no match. */
  private void clear(PrefixMatch into, int numKeys, List<String> candidates) {
    int podCount = candidates.size();
    matchWriter.reset(into, podCount, numKeys, tiers.names());
    for (int i = 0; i < podCount; i++) {
      matchWriter.set(into, i, candidates.get(i), 0, 0);
    }
  }

  /** One group's part of a lookup: its candidates, their unique pod ids, the replies awaited. */
  private static final class Part {
    final KeyLayout keys;
    final int[] positions; // candidate indexes
    final int count;
    int[] uids;
    int u;
    RedisFuture<List<Object>> script;
    RedisFuture<List<KeyValue<byte[], byte[]>>> epochs;
    RedisFuture<List<KeyValue<byte[], byte[]>>> values;

    Part(KeyLayout keys, int[] positions, int count) {
      this.keys = keys;
      this.positions = positions;
      this.count = count;
    }
  }

  /**
   * Looks up the candidates group by group: every group's read is sent first (one round trip to
   * each group's shard, all in flight together), then each reply is scanned as it is awaited within
   * the lookup deadline. A group whose shard does not answer leaves its candidates at no match
   * (counted as a partial lookup); if none answers, the lookup is degraded.
   */
  private void lookupInto(
      long[] requestKeys, int numKeys, List<String> candidates, PrefixMatch into) {
    int podCount = candidates.size();
    long deadline = now() + rc.lookupTimeout().toNanos();
    Scratch s = scratch.get();
    s.ensure(podCount);
    pods.resolveUnknown(candidates);
    RedisClusterAsyncCommands<byte[], byte[]> c = client.reads();
    if (c == null) {
      client.health.failed("lookup", null);
      throw new RedisClientImpl.Unavailable(null);
    }
    List<Part> parts = partition(candidates, podCount);
    byte[][] keysOf = null;
    for (Part p : parts) {
      dispatch(c, p, candidates, requestKeys, numKeys, s);
    }
    int answered = 0;
    int failed = 0;
    RedisClientImpl.Unavailable lastFailure = null;
    for (Part p : parts) {
      if (p.u == 0) {
        continue;
      }
      byte[][] values = keysOf == null || keysOf.length < numKeys ? new byte[numKeys][] : keysOf;
      keysOf = values;
      int got;
      try {
        got = collect(c, p, requestKeys, numKeys, s, values, deadline);
      } catch (RedisClientImpl.Unavailable e) {
        failed++;
        lastFailure = e;
        continue;
      }
      answered++;
      s.clearTable();
      for (int x = 0; x < p.u; x++) {
        s.put(p.uids[x], x);
      }
      int scanned = scan(values, got, p.u, s);
      int nTiers = tiers.names().size();
      int maxMatched = 0;
      for (int j = 0; j < p.count; j++) {
        int i = p.positions[j];
        Integer id = pods.cached(candidates.get(i));
        int x = id == null ? -1 : s.find(id);
        if (x < 0) {
          continue;
        }
        int matched = s.matched[x];
        double score = 0;
        for (int t = 0; t < nTiers; t++) {
          int cnt = s.tierCounts[x * MAX_TIERS + t];
          if (cnt != 0) {
            matchWriter.addTierBlocks(into, i, t, cnt);
            score += cnt * tiers.weight(t);
          }
        }
        matchWriter.set(into, i, candidates.get(i), matched, score);
        maxMatched = Math.max(maxMatched, matched);
      }
      if (scanned > 0 && maxMatched > 0) {
        touch(p.keys, requestKeys, maxMatched);
      }
    }
    if (failed > 0) {
      if (answered == 0) {
        throw lastFailure;
      }
      partial.increment();
    }
  }

  /** The candidates split by pod group (one part when there is a single group). */
  private List<Part> partition(List<String> candidates, int podCount) {
    KeyLayout[] layouts = index.layouts;
    if (layouts.length == 1) {
      int[] all = new int[podCount];
      for (int i = 0; i < podCount; i++) {
        all[i] = i;
      }
      return List.of(new Part(layouts[0], all, podCount));
    }
    int[] count = new int[layouts.length];
    int[] group = new int[podCount];
    for (int i = 0; i < podCount; i++) {
      group[i] = index.groups.group(candidates.get(i));
      count[group[i]]++;
    }
    List<Part> parts = new ArrayList<>();
    int[][] pos = new int[layouts.length][];
    int[] fill = new int[layouts.length];
    for (int g = 0; g < layouts.length; g++) {
      if (count[g] > 0) {
        pos[g] = new int[count[g]];
      }
    }
    for (int i = 0; i < podCount; i++) {
      pos[group[i]][fill[group[i]]++] = i;
    }
    for (int g = 0; g < layouts.length; g++) {
      if (count[g] > 0) {
        parts.add(new Part(layouts[g], pos[g], count[g]));
      }
    }
    return parts;
  }

  /** Sends one group's read (not awaited): its candidates' epochs and the prompt's keys. */
  private void dispatch(
      RedisClusterAsyncCommands<byte[], byte[]> c,
      Part p,
      List<String> candidates,
      long[] requestKeys,
      int numKeys,
      Scratch s) {
    s.clearTable();
    int[] uids = new int[p.count];
    int u = 0;
    for (int j = 0; j < p.count; j++) {
      Integer id = pods.cached(candidates.get(p.positions[j]));
      if (id == null || s.find(id) >= 0) {
        continue;
      }
      s.put(id, u);
      uids[u++] = id;
    }
    p.uids = uids;
    p.u = u;
    if (u == 0) {
      return;
    }
    byte[][] idArgs = new byte[u][];
    for (int x = 0; x < u; x++) {
      idArgs[x] = Bytes.num(uids[x]);
    }
    KeyLayout keys = p.keys;
    if (rc.lookupMode() == LookupMode.SCRIPT) {
      byte[][] k = new byte[1 + numKeys][];
      k[0] = keys.epochKey;
      for (int i = 0; i < numKeys; i++) {
        k[1 + i] = keys.request(requestKeys[i]);
      }
      p.script = client.scripts.call(c, Script.LOOKUP, ScriptOutputType.MULTI, k, idArgs);
      return;
    }
    byte[][] k = new byte[numKeys][];
    for (int i = 0; i < numKeys; i++) {
      k[i] = keys.request(requestKeys[i]);
    }
    p.epochs = c.hmget(keys.epochKey, idArgs);
    p.values = c.mget(k);
  }

  /**
   * Awaits one group's reply (within the lookup's deadline): epochs into {@code s.uEpoch} (by the
   * part's unique ids), values in key order into {@code out}; returns the values read.
   */
  private int collect(
      RedisClusterAsyncCommands<byte[], byte[]> c,
      Part p,
      long[] requestKeys,
      int numKeys,
      Scratch s,
      byte[][] out,
      long deadline) {
    int u = p.u;
    if (p.script != null) {
      List<Object> r;
      try {
        r = client.await(p.script, left(deadline), "lookup");
      } catch (io.lettuce.core.RedisNoScriptException e) {
        client.reloadScripts();
        byte[][] k = new byte[1 + numKeys][];
        k[0] = p.keys.epochKey;
        for (int i = 0; i < numKeys; i++) {
          k[1 + i] = p.keys.request(requestKeys[i]);
        }
        byte[][] idArgs = new byte[u][];
        for (int x = 0; x < u; x++) {
          idArgs[x] = Bytes.num(p.uids[x]);
        }
        r =
            client.await(
                client.scripts.<List<Object>>eval(
                    c, Script.LOOKUP, ScriptOutputType.MULTI, k, idArgs),
                left(deadline),
                "lookup");
      }
      @SuppressWarnings("unchecked")
      List<Object> epochs = (List<Object>) r.get(0);
      for (int x = 0; x < u; x++) {
        Object e = epochs.get(x);
        s.uEpoch[x] = e == null ? 0 : (int) Bytes.parseLong(e);
      }
      int n = r.size() - 1;
      for (int i = 0; i < n; i++) {
        out[i] = (byte[]) r.get(1 + i);
      }
      return n;
    }
    List<KeyValue<byte[], byte[]>> epochs = client.await(p.epochs, left(deadline), "lookup");
    List<KeyValue<byte[], byte[]>> vals = client.await(p.values, left(deadline), "lookup");
    for (int x = 0; x < u; x++) {
      KeyValue<byte[], byte[]> e = epochs.get(x);
      s.uEpoch[x] = e.hasValue() ? (int) Bytes.parseLong(e.getValue()) : 0;
    }
    int n = 0;
    for (KeyValue<byte[], byte[]> kv : vals) {
      if (!kv.hasValue()) {
        break;
      }
      out[n++] = kv.getValue();
    }
    return n;
  }

  private java.time.Duration left(long deadline) {
    return java.time.Duration.ofNanos(Math.max(1, deadline - now()));
  }

  /** The longest-prefix scan over 8-byte entries; returns the blocks scanned. */
  private int scan(byte[][] values, int n, int u, Scratch s) {
    for (int x = 0; x < u; x++) {
      s.active[x] = true;
      s.matched[x] = 0;
      s.seen[x] = -1;
    }
    Arrays.fill(s.tierCounts, 0, u * MAX_TIERS, 0);
    int active = u;
    int b = 0;
    for (; b < n && active > 0; b++) {
      byte[] v = values[b];
      for (int off = 0; off + 8 <= v.length; off += 8) {
        int pid = ((v[off] & 0xff) << 16) | ((v[off + 1] & 0xff) << 8) | (v[off + 2] & 0xff);
        int x = s.find(pid);
        if (x < 0 || !s.active[x]) {
          continue;
        }
        int ep = ((v[off + 3] & 0xff) << 16) | ((v[off + 4] & 0xff) << 8) | (v[off + 5] & 0xff);
        if (ep != s.uEpoch[x]) {
          continue;
        }
        int t = tiers.localOfCode(v[off + 7] & 0xff);
        if (s.seen[x] != b) {
          s.seen[x] = b;
          s.best[x] = t;
        } else if (tiers.weight(t) > tiers.weight(s.best[x])) {
          s.best[x] = t;
        }
      }
      for (int x = 0; x < u; x++) {
        if (!s.active[x]) {
          continue;
        }
        if (s.seen[x] != b) {
          s.active[x] = false;
          s.matched[x] = b;
          active--;
        } else {
          s.tierCounts[x * MAX_TIERS + s.best[x]]++;
        }
      }
    }
    for (int x = 0; x < u; x++) {
      if (s.active[x]) {
        s.matched[x] = b;
      }
    }
    return b;
  }

  /** Refreshes the TTL of matched keys, at most once per quarter TTL per key and replica. */
  private void touch(KeyLayout keys, long[] requestKeys, int matched) {
    long ttl = rc.entryTtl().toNanos();
    if (ttl <= 0) {
      return;
    }
    long now = now();
    List<byte[]> k = null;
    synchronized (touchedKeys) {
      for (int i = 0; i < matched; i++) {
        long rk = requestKeys[i];
        long tk = rk + keys.group * 0xC2B2AE3D27D4EB4FL; // the same key in another group is another
        int slot = (int) ((tk * 0x9E3779B97F4A7C15L) >>> 52);
        if (touchedKeys[slot] == tk && now - touchedAt[slot] < ttl / 4) {
          continue;
        }
        touchedKeys[slot] = tk;
        touchedAt[slot] = now;
        if (k == null) {
          k = new ArrayList<>();
        }
        k.add(keys.request(rk));
      }
    }
    if (k != null) {
      client.submit(new TouchOp(index, k.toArray(new byte[0][]), keys.entryTtl));
    }
  }

  /** Per-thread lookup scratch. */
  private static final class Scratch {
    // by candidate position (posU) or unique candidate (the others)
    int[] posU;
    int[] uid;
    int[] uEpoch;
    boolean[] active;
    int[] matched;
    int[] seen;
    int[] best;
    int[] tierCounts;
    // unique candidates: pod id -> index (open addressing)
    int[] tabKeys = new int[256];
    int[] tabVals = new int[256];
    int tabMask = 255;

    Scratch() {
      alloc(64);
    }

    private void alloc(int n) {
      posU = new int[n];
      uid = new int[n];
      uEpoch = new int[n];
      active = new boolean[n];
      matched = new int[n];
      seen = new int[n];
      best = new int[n];
      tierCounts = new int[n * MAX_TIERS];
    }

    void ensure(int pods) {
      if (posU.length < pods) {
        alloc(Math.max(pods, posU.length * 2));
      }
      int cap = Integer.highestOneBit(Math.max(16, pods * 4 - 1)) << 1;
      if (tabKeys.length < cap) {
        tabKeys = new int[cap];
        tabVals = new int[cap];
        tabMask = cap - 1;
      }
    }

    void clearTable() {
      Arrays.fill(tabKeys, -1);
    }

    int find(int id) {
      int i = (id * 0x9E3779B9 >>> 8) & tabMask;
      while (true) {
        int k = tabKeys[i];
        if (k == id) {
          return tabVals[i];
        }
        if (k == -1) {
          return -1;
        }
        i = (i + 1) & tabMask;
      }
    }

    void put(int id, int x) {
      int i = (id * 0x9E3779B9 >>> 8) & tabMask;
      while (tabKeys[i] != -1) {
        i = (i + 1) & tabMask;
      }
      tabKeys[i] = id;
      tabVals[i] = x;
    }
  }
}
