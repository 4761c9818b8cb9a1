package io.kvroute.kvindex.redis.internal;

import static io.kvroute.kvindex.redis.internal.Tiers.MAX_TIERS;

import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.internal.MatchWriter;
import io.kvroute.kvindex.redis.RedisIndexConfig.LookupMode;
import io.kvroute.kvindex.redis.internal.Scripts.Script;
import io.lettuce.core.KeyValue;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.async.RedisAsyncCommands;
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

  private void lookupInto(
      long[] requestKeys, int numKeys, List<String> candidates, PrefixMatch into) {
    int podCount = candidates.size();
    Scratch s = scratch.get();
    s.ensure(podCount);
    pods.resolveUnknown(candidates);
    // unique candidate ids
    int u = 0;
    s.clearTable();
    for (int i = 0; i < podCount; i++) {
      Integer id = pods.cached(candidates.get(i));
      if (id == null) {
        s.posU[i] = -1;
        continue;
      }
      int x = s.find(id);
      if (x < 0) {
        x = u++;
        s.put(id, x);
        s.uid[x] = id;
      }
      s.posU[i] = x;
    }
    if (u == 0) {
      return;
    }
    byte[][] idArgs = new byte[u][];
    for (int x = 0; x < u; x++) {
      idArgs[x] = Bytes.num(s.uid[x]);
    }
    byte[][] values = new byte[numKeys][];
    int got = fetch(requestKeys, numKeys, idArgs, s, values);
    int scanned = scan(values, got, u, s);
    // results
    int nTiers = tiers.names().size();
    int maxMatched = 0;
    for (int i = 0; i < podCount; i++) {
      int x = s.posU[i];
      if (x < 0) {
        continue;
      }
      int matched = s.matched[x];
      double score = 0;
      for (int t = 0; t < nTiers; t++) {
        int c = s.tierCounts[x * MAX_TIERS + t];
        if (c != 0) {
          matchWriter.addTierBlocks(into, i, t, c);
          score += c * tiers.weight(t);
        }
      }
      matchWriter.set(into, i, candidates.get(i), matched, score);
      maxMatched = Math.max(maxMatched, matched);
    }
    if (scanned > 0 && maxMatched > 0) {
      touch(requestKeys, maxMatched);
    }
  }

  /** Fetches pod epochs into {@code s.uEpoch} and values in key order; returns values read. */
  private int fetch(long[] requestKeys, int numKeys, byte[][] idArgs, Scratch s, byte[][] out) {
    int u = idArgs.length;
    if (rc.lookupMode() == LookupMode.SCRIPT) {
      byte[][] k = new byte[1 + numKeys][];
      k[0] = keys.epochKey;
      for (int i = 0; i < numKeys; i++) {
        k[1 + i] = keys.request(requestKeys[i]);
      }
      List<Object> r =
          client.call(
              c ->
                  client.scripts.<List<Object>>call(
                      c, Script.LOOKUP, ScriptOutputType.MULTI, k, idArgs),
              rc.lookupTimeout(),
              "lookup");
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
    RedisAsyncCommands<byte[], byte[]> c = client.reads();
    if (c == null) {
      client.health.failed("lookup", null);
      throw new RedisClientImpl.Unavailable(null);
    }
    byte[][] k = new byte[numKeys][];
    for (int i = 0; i < numKeys; i++) {
      k[i] = keys.request(requestKeys[i]);
    }
    RedisFuture<List<KeyValue<byte[], byte[]>>> fe = c.hmget(keys.epochKey, idArgs);
    RedisFuture<List<KeyValue<byte[], byte[]>>> fv = c.mget(k);
    List<KeyValue<byte[], byte[]>> epochs = client.await(fe, rc.lookupTimeout(), "lookup");
    List<KeyValue<byte[], byte[]>> vals = client.await(fv, rc.lookupTimeout(), "lookup");
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
  private void touch(long[] requestKeys, int matched) {
    long ttl = rc.entryTtl().toNanos();
    if (ttl <= 0) {
      return;
    }
    long now = now();
    List<byte[]> k = null;
    synchronized (touchedKeys) {
      for (int i = 0; i < matched; i++) {
        long rk = requestKeys[i];
        int slot = (int) ((rk * 0x9E3779B97F4A7C15L) >>> 52);
        if (touchedKeys[slot] == rk && now - touchedAt[slot] < ttl / 4) {
          continue;
        }
        touchedKeys[slot] = rk;
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
