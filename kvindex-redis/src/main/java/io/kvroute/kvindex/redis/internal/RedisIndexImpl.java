package io.kvroute.kvindex.redis.internal;

import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.IndexStats;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.hash.RequestKeyHasher;
import io.kvroute.kvindex.internal.MatchWriter;
import io.kvroute.kvindex.redis.RedisBlockIndex;
import io.kvroute.kvindex.redis.RedisIndexConfig;
import io.kvroute.kvindex.redis.RedisIndexConfig.IngestMode;
import io.kvroute.kvindex.redis.RedisIndexConfig.LookupMode;
import io.kvroute.kvindex.redis.internal.Scripts.Script;
import io.lettuce.core.KeyValue;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.async.RedisAsyncCommands;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.security.SecureRandom;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Redis {@link io.kvroute.kvindex.BlockIndex} of one namespace. Key layout, scripts and the
 * reasons for them: the module's README.
 *
 * <p><b>Write path.</b> Request keys are computed here exactly as the in-memory index does (same
 * hasher, same engine/index block-size ratios, partial index blocks kept locally); each event
 * becomes one {@link Op} (one call of {@code write.lua}) queued for the client's writer thread.
 * Parents resolve through the local {@link MappingCache}, else one read.
 *
 * <p><b>Read path.</b> One round trip: the candidate pods' epochs and the prompt's request keys in
 * order ({@code lookup.lua}, or pipelined {@code HMGET} + {@code MGET}), then the same longest-
 * prefix scan as the in-memory index over the returned 8-byte entries.
 *
 * <p><b>Thread-safety.</b> Thread-safe: caches are concurrent maps or monitors; counters are
 * adders; lookups use per-thread scratch; one pod's writes must not overlap (as {@link
 * io.kvroute.kvindex.BlockIndex} callers guarantee).
 */
final class RedisIndexImpl implements RedisBlockIndex {
  private static final Logger LOG = LoggerFactory.getLogger(RedisIndexImpl.class);
  private static final long GROUP_MIX = 0x9E3779B97F4A7C15L;
  private static final int MAX_TIERS = 16;
  private static final int ID_SPACE = 1 << 24;
  private static final int MAX_SIDE_ENTRIES = 1 << 16;
  private static final int MAX_BACKLOG = 256;
  private static final long NEGATIVE_TTL_NANOS = 1_000_000_000L;
  private static final byte[] EMPTY = new byte[0];
  private static final List<String> FIXED_TIERS =
      List.of("GPU", "CPU", "STORAGE", "DISK", "FS", "OBJ", "CPU_PINNED", "EXTERNAL");

  private final RedisClientImpl client;
  private final RedisIndexConfig rc;
  private final IndexConfig config;
  private final RequestKeyHasher hasher;
  private final String namespace;
  private final boolean ownsClient;
  private final MatchWriter matchWriter = MatchWriter.get();
  private final ThreadLocal<Scratch> scratch = ThreadLocal.withInitial(Scratch::new);

  // key layout
  private final byte[] prefix; // {keyPrefix:namespace}:
  private final byte[] pBytes;
  private final byte[] rPrefix;
  private final byte[] ePrefix;
  private final byte[] podsKey;
  private final byte[] podnKey;
  private final byte[] epochKey;
  private final byte[] statsKey;
  private final byte[] tiernKey;
  private final byte[] entryTtl;
  private final byte[] mappingTtl;
  private final byte[] maxEntries;

  // local state
  private final ConcurrentHashMap<String, Integer> podIds = new ConcurrentHashMap<>();
  private final ConcurrentHashMap<String, Long> unknownUntil = new ConcurrentHashMap<>();
  private final MappingCache mappings;
  private final LinkedHashMap<Long, Partial> partials = boundedMap();
  private final long[] touchedKeys = new long[4096];
  private final long[] touchedAt = new long[4096];
  private final ConcurrentHashMap<String, Lease> leases = new ConcurrentHashMap<>();
  private final SecureRandom random = new SecureRandom();

  // tiers: local order (GPU first), codes 0..255 in Redis
  private final Object tierLock = new Object();
  private final String[] tierNames = new String[MAX_TIERS];
  private final double[] tierWeights = new double[MAX_TIERS];
  private final Map<String, Integer> tierIds = new ConcurrentHashMap<>();
  private final int[] codeToLocal = new int[256];
  private final int[] localToCode = new int[MAX_TIERS];
  private volatile List<String> tierNameList = List.of();
  private int tierCount;

  // counters
  private final LongAdder evStored = new LongAdder();
  private final LongAdder evRemoved = new LongAdder();
  private final LongAdder evCleared = new LongAdder();
  private final LongAdder evPodRemoved = new LongAdder();
  private final LongAdder blocksStored = new LongAdder();
  private final LongAdder blocksRemoved = new LongAdder();
  private final LongAdder lookups = new LongAdder();
  private final LongAdder lookupsDegraded = new LongAdder();
  private final LongAdder buffered = new LongAdder();
  private final LongAdder fenced = new LongAdder();
  private final LongAdder leasesLost = new LongAdder();
  private final Map<String, LongAdder> evictions = new TreeMap<>();
  private final Map<String, LongAdder> dropped = new TreeMap<>();
  private final Set<String> warned = Collections.synchronizedSet(new TreeSet<>());
  private volatile boolean closed;

  RedisIndexImpl(RedisClientImpl client, IndexConfig config, String namespace, boolean owns) {
    this.client = client;
    this.rc = client.config;
    this.config = Objects.requireNonNull(config, "config");
    this.ownsClient = owns;
    String ns = namespace != null ? namespace : config.modelName();
    this.namespace = ns.isEmpty() ? "default" : ns;
    if (this.namespace.indexOf('{') >= 0 || this.namespace.indexOf('}') >= 0) {
      throw new IllegalArgumentException(
          "index namespace must hold no braces, was \"" + this.namespace + "\"");
    }
    this.hasher =
        RequestKeyHasher.create(config.blockSize(), config.hashSeed(), config.modelName());
    String p = "{" + rc.keyPrefix() + ":" + this.namespace + "}:";
    this.prefix = Bytes.utf8(p);
    this.pBytes = prefix;
    this.rPrefix = Bytes.utf8(p + "r:");
    this.ePrefix = Bytes.utf8(p + "e:");
    this.podsKey = Bytes.utf8(p + "pods");
    this.podnKey = Bytes.utf8(p + "podn");
    this.epochKey = Bytes.utf8(p + "epoch");
    this.statsKey = Bytes.utf8(p + "stats");
    this.tiernKey = Bytes.utf8(p + "tiern");
    this.entryTtl = Bytes.num(rc.entryTtl().toMillis());
    this.mappingTtl = Bytes.num(rc.mappingTtl().toMillis());
    this.maxEntries = Bytes.num(config.maxPodsPerKey());
    this.mappings = new MappingCache(rc.mappingCacheSize());
    Arrays.fill(codeToLocal, -1);
    for (Map.Entry<String, Double> e : config.tierWeights().entrySet()) {
      localTier(e.getKey());
    }
    evictions.put("max_pods_per_key", new LongAdder());
    for (String r :
        List.of(
            "unknown_parent",
            "unknown_engine_key",
            "unknown_pod",
            "non_dense",
            "block_size",
            "max_pods",
            "group_idx",
            "partial_parent",
            "redis_unavailable",
            "queue_full",
            "fenced")) {
      dropped.put(r, new LongAdder());
    }
    config.meterRegistry().ifPresent(this::bindMeters);
  }

  private static <V> LinkedHashMap<Long, V> boundedMap() {
    return new LinkedHashMap<>(256, 0.75f, true) {
      private static final long serialVersionUID = 1L;

      @Override
      protected boolean removeEldestEntry(Map.Entry<Long, V> eldest) {
        return size() > MAX_SIDE_ENTRIES;
      }
    };
  }

  private static long engineKey(long hash, int group) {
    long k = hash + group * GROUP_MIX;
    return k == 0 ? 1 : k;
  }

  private long now() {
    return rc.nanoClock().getAsLong();
  }

  // ------------------------------------------------------------------ tiers

  /** Local tier index of a medium (GPU first), registering it locally on first sight. */
  private int localTier(String medium) {
    String m = medium == null || medium.isEmpty() ? IndexConfig.GPU : medium;
    Integer id = tierIds.get(m);
    if (id != null) {
      return id;
    }
    String up = m.toUpperCase(Locale.ROOT);
    synchronized (tierLock) {
      id = tierIds.get(up);
      if (id == null) {
        if (tierCount >= MAX_TIERS) {
          warnOnce(
              "tiers", "more than " + MAX_TIERS + " media; counting " + up + " as the last one");
          return MAX_TIERS - 1;
        }
        id = tierCount++;
        tierNames[id] = up;
        tierWeights[id] = config.tierWeight(up);
        int code = tierCode(up);
        localToCode[id] = code;
        codeToLocal[code] = id;
        tierNameList = List.copyOf(Arrays.asList(tierNames).subList(0, id + 1));
        tierIds.put(up, id);
      }
      tierIds.put(m, id);
      return id;
    }
  }

  /** The tier's code in Redis: fixed for common media, else a hash of the name in [8, 256). */
  private static int tierCode(String upperName) {
    int f = FIXED_TIERS.indexOf(upperName);
    if (f >= 0) {
      return f;
    }
    int h = upperName.hashCode() * 0x9E3779B9;
    return 8 + ((h >>> 8) % 248);
  }

  private int codeOf(String medium) {
    int local = localTier(medium);
    int code = localToCode[local];
    if (code >= FIXED_TIERS.size() && warned.add("tiern:" + code)) {
      try {
        client.call(
            c -> c.hsetnx(tiernKey, Bytes.num(code), Bytes.utf8(tierNames[local])),
            rc.commandTimeout(),
            "write");
      } catch (RedisClientImpl.Unavailable e) {
        warned.remove("tiern:" + code);
      }
    }
    return code;
  }

  /** Local tier of a code read from Redis (a round trip the first time a custom code is seen). */
  private int localOfCode(int code) {
    int l = codeToLocal[code];
    if (l >= 0) {
      return l;
    }
    String name = null;
    if (code < FIXED_TIERS.size()) {
      name = FIXED_TIERS.get(code);
    } else {
      try {
        byte[] n = client.call(c -> c.hget(tiernKey, Bytes.num(code)), rc.lookupTimeout(), "read");
        name = n == null ? null : Bytes.str(n);
      } catch (RedisClientImpl.Unavailable e) {
        return 0;
      }
    }
    if (name == null) {
      return 0;
    }
    return localTier(name);
  }

  // ------------------------------------------------------------------ pods

  /** The pod's id in Redis; registers it if {@code create}; -1 if unknown or no room. */
  private int podId(String pod, boolean create) {
    Integer id = podIds.get(pod);
    if (id != null) {
      return id;
    }
    if (create) {
      return register(pod);
    }
    byte[] v = client.call(c -> c.hget(podsKey, Bytes.utf8(pod)), rc.commandTimeout(), "read");
    if (v == null) {
      return -1;
    }
    int i = (int) Bytes.parseLong(v);
    podIds.put(pod, i);
    return i;
  }

  int register(String pod) {
    podIds.remove(pod);
    long preferred = preferredId(pod);
    List<Object> r =
        client.call(
            c ->
                client.scripts.call(
                    c,
                    Script.REGISTER,
                    ScriptOutputType.MULTI,
                    new byte[][] {podsKey},
                    pBytes,
                    Bytes.utf8(pod),
                    Bytes.num(preferred),
                    Bytes.num(ID_SPACE),
                    Bytes.num(config.maxPods())),
            rc.commandTimeout(),
            "write");
    int id = (int) Bytes.parseLong(r.get(0));
    if (id < 0) {
      warnOnce("max_pods", "index.maxPods (" + config.maxPods() + ") reached; dropping events");
      return -1;
    }
    podIds.put(pod, id);
    return id;
  }

  private static long preferredId(String pod) {
    long h = 0xcbf29ce484222325L;
    for (int i = 0; i < pod.length(); i++) {
      h = (h ^ pod.charAt(i)) * 0x100000001b3L;
    }
    h ^= h >>> 29;
    h *= 0xBF58476D1CE4E5B9L;
    return (h >>> 40) & (ID_SPACE - 1);
  }

  // ------------------------------------------------------------------ write path

  @Override
  public void blockStored(String podId, KvEvent.BlockStored event) {
    Objects.requireNonNull(event, "event");
    store(
        podId,
        event.blockHashes().values(),
        event.hasParent(),
        event.parentHash(),
        event.tokenIds(),
        event.blockSize(),
        event.effectiveLoraName(),
        event.medium(),
        event.groupIndex(),
        event.extraKeys());
  }

  private void store(
      String podId,
      long[] engineHashes,
      boolean hasParent,
      long parentEngineHash,
      int[] tokenIds,
      int blockSize,
      String loraName,
      String medium,
      int groupIdx,
      List<?> extraKeys) {
    Objects.requireNonNull(podId, "podId");
    Objects.requireNonNull(engineHashes, "engineHashes");
    evStored.increment();
    int n = engineHashes.length;
    if (n == 0) {
      return;
    }
    if (groupIdx < 0 || groupIdx > 255) {
      drop("group_idx", n);
      return;
    }
    try {
      int pod = podId(podId, true);
      if (pod < 0) {
        drop("max_pods", n);
        return;
      }
      int tier = codeOf(medium);
      if (tokenIds == null || tokenIds.length == 0 || blockSize <= 0) {
        byte[][] keys = new byte[1 + n][];
        keys[0] = podnKey;
        for (int i = 0; i < n; i++) {
          keys[1 + i] = Bytes.key(ePrefix, engineKey(engineHashes[i], groupIdx));
        }
        submit(new WriteOp(this, 'T', podId, pod, groupIdx, tier, keys, n, 0, null, null));
        return;
      }
      storeWithTokens(
          podId,
          pod,
          engineHashes,
          hasParent,
          parentEngineHash,
          tokenIds,
          blockSize,
          loraName,
          tier,
          groupIdx,
          extraKeys);
    } catch (RedisClientImpl.Unavailable e) {
      drop("redis_unavailable", n);
    }
  }

  private void storeWithTokens(
      String podName,
      int pod,
      long[] hashes,
      boolean hasParent,
      long parentHash,
      int[] tokens,
      int bs,
      String lora,
      int tier,
      int group,
      List<?> extraKeys) {
    int n = hashes.length;
    int ibs = config.blockSize();
    if (bs % ibs != 0 && ibs % bs != 0) {
      drop("block_size", n);
      warnOnce(
          "block_size:" + bs,
          "engine block size " + bs + " is not a multiple or divisor of index.blockSize " + ibs);
      return;
    }
    int m = tokens.length / bs;
    int hashed = Math.min(n, m);
    if (m != n || tokens.length % bs != 0) {
      drop("non_dense", Math.max(0, n - m));
    }
    if (hashed == 0) {
      return;
    }
    int firstHashed = m - hashed;
    long parentKey;
    int[] pending = null;
    if (!hasParent) {
      parentKey = hasher.root(lora);
    } else {
      long pek = engineKey(parentHash, group);
      Partial pp;
      synchronized (partials) {
        pp = partials.get(pek);
      }
      if (pp != null) {
        parentKey = pp.parentKey;
        pending = pp.tokens;
      } else {
        long[] out = new long[1];
        int kind = mappings.get(pek, out);
        if (kind < 0) {
          kind = readMapping(pek, out);
        }
        if (kind < 0) {
          drop("unknown_parent", n);
          return;
        }
        if (kind == MappingCache.MID) {
          drop("partial_parent", n);
          return;
        }
        parentKey = out[0];
      }
    }
    int p = pending == null ? 0 : pending.length;
    int spanTokens = m * bs;
    int[] stream = tokens;
    if (p > 0) {
      stream = new int[p + spanTokens];
      System.arraycopy(pending, 0, stream, 0, p);
      System.arraycopy(tokens, 0, stream, p, spanTokens);
    }
    int total = p + spanTokens;
    int nIdx = total / ibs;
    long[] rk = new long[nIdx];
    boolean useExtras = extraKeys != null && ibs == bs && p == 0 && extraKeys.size() == n && n == m;
    long parent = parentKey;
    for (int j = 0; j < nIdx; j++) {
      long extraHash = 0;
      if (useExtras) {
        extraHash = extraHash(extraKeys.get(j), lora);
      }
      parent = hasher.chain(parent, stream, j * ibs, (j + 1) * ibs, extraHash);
      rk[j] = parent;
    }
    List<byte[]> rkKeys = new ArrayList<>(nIdx);
    List<byte[]> ekKeys = new ArrayList<>(hashed);
    List<byte[]> ekValues = new ArrayList<>(hashed);
    int lastJ = -1;
    for (int e = firstHashed; e < m; e++) {
      int start = p + e * bs;
      int end = start + bs;
      int jFrom = start / ibs;
      int jTo = Math.min((end - 1) / ibs, nIdx - 1);
      if (jFrom > jTo) {
        continue;
      }
      long ek = engineKey(hashes[e - firstHashed], group);
      for (int j = Math.max(jFrom, lastJ + 1); j <= jTo; j++) {
        rkKeys.add(Bytes.key(rPrefix, rk[j]));
        lastJ = j;
      }
      byte kind =
          jFrom == jTo
              ? (end % ibs == 0 ? MappingCache.BOUNDARY : MappingCache.MID)
              : MappingCache.MULTI;
      byte[] v = new byte[1 + 8 * (jTo - jFrom + 1)];
      v[0] = kind;
      for (int j = jFrom; j <= jTo; j++) {
        Bytes.putLong(v, 1 + 8 * (j - jFrom), rk[j]);
      }
      ekKeys.add(Bytes.key(ePrefix, ek));
      ekValues.add(v);
      mappings.put(ek, rk[jTo], kind);
      blocksStored.increment();
    }
    if (total % ibs != 0) {
      long lastEk = engineKey(hashes[n - 1], group);
      long base = nIdx > 0 ? rk[nIdx - 1] : parentKey;
      Partial part = new Partial(base, Arrays.copyOfRange(stream, nIdx * ibs, total));
      synchronized (partials) {
        partials.put(lastEk, part);
      }
    }
    if (rkKeys.isEmpty() && ekKeys.isEmpty()) {
      return;
    }
    byte[][] keys = new byte[1 + rkKeys.size() + ekKeys.size()][];
    keys[0] = podnKey;
    int k = 1;
    for (byte[] b : rkKeys) {
      keys[k++] = b;
    }
    for (byte[] b : ekKeys) {
      keys[k++] = b;
    }
    submit(
        new WriteOp(
            this,
            'S',
            podName,
            pod,
            group,
            tier,
            keys,
            rkKeys.size(),
            ekKeys.size(),
            ekValues.toArray(new byte[0][]),
            null));
  }

  /** Reads a mapping another replica (or an earlier life of this one) wrote. */
  private int readMapping(long ek, long[] out) {
    // our own mapping may still be queued: let the writer catch up first
    client.flush(client.submittedSeq());
    byte[] v = client.call(c -> c.get(Bytes.key(ePrefix, ek)), rc.commandTimeout(), "read");
    if (v == null || v.length < 9) {
      return -1;
    }
    out[0] = Bytes.getLong(v, v.length - 8);
    mappings.put(ek, out[0], v[0]);
    return v[0];
  }

  private static long extraHash(Object tuple, String lora) {
    if (!(tuple instanceof List)) {
      return 0;
    }
    List<?> keys = (List<?>) tuple;
    if (lora != null && !keys.isEmpty() && lora.equals(keys.get(0))) {
      keys = keys.subList(1, keys.size());
    }
    return keys.isEmpty() ? 0 : RequestKeyHasher.extraKeysHash(keys);
  }

  @Override
  public void blockRemoved(String podId, KvEvent.BlockRemoved event) {
    Objects.requireNonNull(podId, "podId");
    long[] engineHashes = event.blockHashes().values();
    String medium = event.medium();
    int groupIdx = event.groupIndex();
    evRemoved.increment();
    int n = engineHashes.length;
    if (groupIdx < 0 || groupIdx > 255) {
      drop("group_idx", n);
      return;
    }
    try {
      int pod = podId(podId, false);
      if (pod < 0) {
        drop("unknown_pod", n);
        return;
      }
      if (n == 0) {
        return;
      }
      int tier = codeOf(medium);
      byte[][] keys = new byte[1 + n][];
      keys[0] = podnKey;
      boolean[] partial = new boolean[n];
      for (int i = 0; i < n; i++) {
        long ek = engineKey(engineHashes[i], groupIdx);
        keys[1 + i] = Bytes.key(ePrefix, ek);
        synchronized (partials) {
          partial[i] = partials.get(ek) != null;
        }
      }
      submit(new WriteOp(this, 'R', podId, pod, groupIdx, tier, keys, n, 0, null, partial));
    } catch (RedisClientImpl.Unavailable e) {
      drop("redis_unavailable", n);
    }
  }

  @Override
  public void allBlocksCleared(String podId) {
    Objects.requireNonNull(podId, "podId");
    evCleared.increment();
    try {
      int pod = podId(podId, false);
      if (pod >= 0) {
        submit(new WriteOp(this, 'C', podId, pod, 0, 0, new byte[][] {podnKey}, 0, 0, null, null));
      }
    } catch (RedisClientImpl.Unavailable e) {
      drop("redis_unavailable", 1);
    }
  }

  @Override
  public void removePod(String podId) {
    Objects.requireNonNull(podId, "podId");
    evPodRemoved.increment();
    try {
      int pod = podId(podId, false);
      if (pod < 0) {
        return;
      }
      Lease l = leases.remove(podId);
      WriteOp op =
          new WriteOp(this, 'X', podId, pod, 0, 0, new byte[][] {podnKey}, 0, 0, null, null);
      if (!client.submit(op)) { // unfenced: any replica may remove a pod
        op.dropped("queue_full");
      }
      // applied before anything else may register the name again
      client.flush(op.seq);
      podIds.remove(podId);
      if (l != null) {
        release(l, pod);
      }
    } catch (RedisClientImpl.Unavailable e) {
      drop("redis_unavailable", 1);
    }
  }

  /** Queues an op (through the pod's lease under LEASED). */
  private void submit(WriteOp op) {
    if (rc.ingestMode() != IngestMode.LEASED) {
      if (!client.submit(op)) {
        op.dropped("queue_full");
      }
      return;
    }
    Lease l = leases.computeIfAbsent(op.podName, k -> new Lease());
    synchronized (l) {
      long now = now();
      if (l.token == null && now >= l.nextAttempt) {
        acquire(l, op.pod, now);
      }
      if (l.token != null) {
        op.token = l.tokenBytes;
        if (!client.submit(op)) {
          op.dropped("queue_full");
        }
        return;
      }
      // keep the last 2 lease TTLs (at most MAX_BACKLOG events): what a crashed writer may not
      // have written before its lease expired
      buffered.increment();
      op.born = now;
      l.backlog.addLast(op);
      long horizon = now - 2 * rc.leaseTtl().toNanos();
      while (l.backlog.size() > MAX_BACKLOG || l.backlog.peekFirst().born < horizon) {
        l.backlog.removeFirst();
      }
    }
  }

  /** Tries to take the pod's lease; on success replays the backlog. Caller holds {@code l}. */
  private void acquire(Lease l, int pod, long now) {
    String token = rc.replicaId() + "/" + Long.toHexString(random.nextLong());
    if (leaseCall('A', pod, token)) {
      l.token = token;
      l.tokenBytes = Bytes.utf8(token);
      l.renewAt = now + rc.leaseTtl().toNanos() / 3;
      // replay what this replica received while another one held the lease: the writes are
      // idempotent, so re-applying what the previous holder already wrote is harmless
      for (WriteOp b : l.backlog) {
        b.token = l.tokenBytes;
        if (!client.submit(b)) {
          b.dropped("queue_full");
        }
      }
      l.backlog.clear();
    } else {
      l.nextAttempt = now + rc.leaseTtl().toNanos() / 3;
    }
  }

  private boolean leaseCall(char op, int pod, String token) {
    try {
      Long r =
          client.call(
              c ->
                  client.scripts.<Long>call(
                      c,
                      Script.LEASE,
                      ScriptOutputType.INTEGER,
                      new byte[][] {Bytes.concat(prefix, Bytes.utf8("lease:" + pod))},
                      new byte[] {(byte) op},
                      Bytes.utf8(token),
                      Bytes.num(rc.leaseTtl().toMillis())),
              rc.commandTimeout(),
              "lease");
      return r != null && r == 1L;
    } catch (RedisClientImpl.Unavailable e) {
      return false;
    }
  }

  /** Renews the leases due (called by the client's scheduler). */
  void maintain() {
    if (rc.ingestMode() != IngestMode.LEASED || closed) {
      return;
    }
    long now = now();
    for (Map.Entry<String, Lease> e : leases.entrySet()) {
      Lease l = e.getValue();
      synchronized (l) {
        if (l.token == null) {
          // take over a quiet pod whose writer went away: what this replica buffered is replayed
          Integer pod = podIds.get(e.getKey());
          if (!l.backlog.isEmpty() && now >= l.nextAttempt && pod != null) {
            acquire(l, pod, now);
          }
          continue;
        }
        if (now < l.renewAt) {
          continue;
        }
        Integer pod = podIds.get(e.getKey());
        if (pod != null && leaseCall('R', pod, l.token)) {
          l.renewAt = now + rc.leaseTtl().toNanos() / 3;
        } else {
          lost(l);
        }
      }
    }
  }

  private void lost(Lease l) {
    if (l.token != null) {
      l.token = null;
      l.tokenBytes = null;
      l.nextAttempt = now();
      leasesLost.increment();
    }
  }

  void releaseLeases() {
    for (Map.Entry<String, Lease> e : leases.entrySet()) {
      Integer pod = podIds.get(e.getKey());
      if (pod != null) {
        release(e.getValue(), pod);
      }
    }
    leases.clear();
  }

  private void release(Lease l, int pod) {
    String token;
    synchronized (l) {
      token = l.token;
      l.token = null;
    }
    if (token != null) {
      leaseCall('D', pod, token);
    }
  }

  /** Called by the writer for a reply with status 1: the pod was not registered under its id. */
  boolean reRegister(WriteOp op) {
    int id = register(op.podName);
    if (id < 0) {
      return false;
    }
    op.pod = id;
    return true;
  }

  void fenced(WriteOp op) {
    fenced.increment();
    Lease l = leases.get(op.podName);
    if (l != null) {
      synchronized (l) {
        if (l.tokenBytes == op.token) {
          lost(l);
        }
      }
    }
    op.dropped("fenced");
  }

  void counted(char kind, List<Object> reply, boolean[] partial) {
    if (kind == 'S' || kind == 'T') {
      long evicted = Bytes.parseLong(reply.get(2));
      if (evicted > 0) {
        evictions.get("max_pods_per_key").add(evicted);
      }
      if (kind == 'T') {
        blocksStored.add(Bytes.parseLong(reply.get(3)));
        drop("unknown_engine_key", reply.size() - 5);
      }
    } else if (kind == 'R') {
      blocksRemoved.add(Bytes.parseLong(reply.get(1)));
      for (int i = 5; i < reply.size(); i++) {
        int idx = (int) Bytes.parseLong(reply.get(i));
        if (partial == null || !partial[idx]) {
          drop("unknown_engine_key", 1);
        }
      }
    }
  }

  // ------------------------------------------------------------------ read path

  @Override
  public RequestKeyHasher keyHasher() {
    return hasher;
  }

  @Override
  public PrefixMatch lookup(long[] requestKeys, int numKeys, List<String> pods, PrefixMatch into) {
    Objects.requireNonNull(requestKeys, "requestKeys");
    Objects.requireNonNull(pods, "podIds");
    Objects.requireNonNull(into, "into");
    Objects.checkFromIndexSize(0, numKeys, requestKeys.length);
    lookups.increment();
    if (rc.readYourWrites()) {
      client.flush(client.submittedSeq());
    }
    int podCount = pods.size();
    matchWriter.reset(into, podCount, numKeys, tierNameList);
    for (int i = 0; i < podCount; i++) {
      matchWriter.set(into, i, pods.get(i), 0, 0);
    }
    if (numKeys == 0 || podCount == 0) {
      return into;
    }
    try {
      lookupInto(requestKeys, numKeys, pods, into);
    } catch (RedisClientImpl.Unavailable e) {
      lookupsDegraded.increment();
      matchWriter.reset(into, podCount, numKeys, tierNameList);
      for (int i = 0; i < podCount; i++) {
        matchWriter.set(into, i, pods.get(i), 0, 0);
      }
    }
    return into;
  }

  private void lookupInto(long[] requestKeys, int numKeys, List<String> pods, PrefixMatch into) {
    int podCount = pods.size();
    Scratch s = scratch.get();
    s.ensure(podCount);
    resolveUnknown(pods);
    // unique candidate ids
    int u = 0;
    s.clearTable();
    for (int i = 0; i < podCount; i++) {
      Integer id = podIds.get(pods.get(i));
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
    List<String> names = tierNameList;
    int tiers = names.size();
    int maxMatched = 0;
    for (int i = 0; i < podCount; i++) {
      int x = s.posU[i];
      if (x < 0) {
        continue;
      }
      int matched = s.matched[x];
      double score = 0;
      for (int t = 0; t < tiers; t++) {
        int c = s.tierCounts[x * MAX_TIERS + t];
        if (c != 0) {
          matchWriter.addTierBlocks(into, i, t, c);
          score += c * tierWeights[t];
        }
      }
      matchWriter.set(into, i, pods.get(i), matched, score);
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
      byte[][] keys = new byte[1 + numKeys][];
      keys[0] = epochKey;
      for (int i = 0; i < numKeys; i++) {
        keys[1 + i] = Bytes.key(rPrefix, requestKeys[i]);
      }
      List<Object> r =
          client.call(
              c ->
                  client.scripts.<List<Object>>call(
                      c, Script.LOOKUP, ScriptOutputType.MULTI, keys, idArgs),
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
    byte[][] keys = new byte[numKeys][];
    for (int i = 0; i < numKeys; i++) {
      keys[i] = Bytes.key(rPrefix, requestKeys[i]);
    }
    RedisFuture<List<KeyValue<byte[], byte[]>>> fe = c.hmget(epochKey, idArgs);
    RedisFuture<List<KeyValue<byte[], byte[]>>> fv = c.mget(keys);
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
        int t = localOfCode(v[off + 7] & 0xff);
        if (s.seen[x] != b) {
          s.seen[x] = b;
          s.best[x] = t;
        } else if (tierWeights[t] > tierWeights[s.best[x]]) {
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

  /** Names never seen: one read (HMGET) for all of them, then cached; misses for a second. */
  private void resolveUnknown(List<String> pods) {
    List<String> unknown = null;
    long now = now();
    for (String p : pods) {
      if (podIds.containsKey(p)) {
        continue;
      }
      Long until = unknownUntil.get(p);
      if (until != null && now < until) {
        continue;
      }
      if (unknown == null) {
        unknown = new ArrayList<>();
      }
      unknown.add(p);
    }
    if (unknown == null) {
      return;
    }
    byte[][] fields = new byte[unknown.size()][];
    for (int i = 0; i < fields.length; i++) {
      fields[i] = Bytes.utf8(unknown.get(i));
    }
    List<KeyValue<byte[], byte[]>> r =
        client.call(c -> c.hmget(podsKey, fields), rc.lookupTimeout(), "lookup");
    if (unknownUntil.size() > MAX_SIDE_ENTRIES) {
      unknownUntil.clear();
    }
    for (int i = 0; i < fields.length; i++) {
      KeyValue<byte[], byte[]> kv = r.get(i);
      if (kv.hasValue()) {
        podIds.put(unknown.get(i), (int) Bytes.parseLong(kv.getValue()));
        unknownUntil.remove(unknown.get(i));
      } else {
        unknownUntil.put(unknown.get(i), now + NEGATIVE_TTL_NANOS);
      }
    }
  }

  /** Refreshes the TTL of matched keys, at most once per quarter TTL per key and replica. */
  private void touch(long[] requestKeys, int matched) {
    long ttl = rc.entryTtl().toNanos();
    if (ttl <= 0) {
      return;
    }
    long now = now();
    List<byte[]> keys = null;
    synchronized (touchedKeys) {
      for (int i = 0; i < matched; i++) {
        long k = requestKeys[i];
        int slot = (int) ((k * 0x9E3779B97F4A7C15L) >>> 52);
        if (touchedKeys[slot] == k && now - touchedAt[slot] < ttl / 4) {
          continue;
        }
        touchedKeys[slot] = k;
        touchedAt[slot] = now;
        if (keys == null) {
          keys = new ArrayList<>();
        }
        keys.add(Bytes.key(rPrefix, k));
      }
    }
    if (keys != null) {
      client.submit(new TouchOp(this, keys.toArray(new byte[0][]), entryTtl));
    }
  }

  // ------------------------------------------------------------------ introspection

  @Override
  public Set<String> pods() {
    flush();
    try {
      List<byte[]> names = client.call(c -> c.hkeys(podsKey), rc.commandTimeout(), "read");
      Set<String> out = new TreeSet<>();
      for (byte[] b : names) {
        out.add(Bytes.str(b));
      }
      return Collections.unmodifiableSet(out);
    } catch (RedisClientImpl.Unavailable e) {
      return Set.of();
    }
  }

  @Override
  public Map<String, Long> podEntries(String podId) {
    flush();
    try {
      int id = podId(podId, false);
      if (id < 0) {
        return Map.of();
      }
      return countsByTier(id);
    } catch (RedisClientImpl.Unavailable e) {
      return Map.of();
    }
  }

  private Map<String, Long> countsByTier(int id) {
    Map<byte[], byte[]> raw =
        client.call(
            c -> c.hgetall(Bytes.concat(prefix, Bytes.utf8("c:" + id))),
            rc.commandTimeout(),
            "read");
    TreeMap<Integer, Long> byLocal = new TreeMap<>();
    for (Map.Entry<byte[], byte[]> e : raw.entrySet()) {
      long count = Bytes.parseLong(e.getValue());
      if (count != 0) {
        byLocal.merge(localOfCode((int) Bytes.parseLong(e.getKey())), count, Long::sum);
      }
    }
    Map<String, Long> m = new LinkedHashMap<>();
    List<String> names = tierNameList;
    byLocal.forEach((t, c) -> m.put(names.get(t), c));
    return Collections.unmodifiableMap(m);
  }

  @Override
  public IndexStats stats() {
    flush();
    long keys = 0;
    long engineKeys = 0;
    long entries = 0;
    int pods = 0;
    try {
      Map<byte[], byte[]> st = client.call(c -> c.hgetall(statsKey), rc.commandTimeout(), "read");
      for (Map.Entry<byte[], byte[]> e : st.entrySet()) {
        String k = Bytes.str(e.getKey());
        if (k.equals("keys")) {
          keys = Bytes.parseLong(e.getValue());
        } else if (k.equals("engine_keys")) {
          engineKeys = Bytes.parseLong(e.getValue());
        }
      }
      List<byte[]> ids = client.call(c -> c.hkeys(podnKey), rc.commandTimeout(), "read");
      pods = ids.size();
      for (byte[] id : ids) {
        for (long c : countsByTier((int) Bytes.parseLong(id)).values()) {
          entries += c;
        }
      }
    } catch (RedisClientImpl.Unavailable e) {
      // zeros: no information
    }
    Map<String, Long> ev = new HashMap<>();
    ev.put("stored", evStored.sum());
    ev.put("removed", evRemoved.sum());
    ev.put("cleared", evCleared.sum());
    ev.put("pod_removed", evPodRemoved.sum());
    return IndexStats.builder()
        .keys(keys)
        .entries(entries)
        .engineKeys(engineKeys)
        .pods(pods)
        .events(ev)
        .evictions(sums(evictions))
        .dropped(sums(dropped))
        .lookups(lookups.sum())
        .build();
  }

  private static Map<String, Long> sums(Map<String, LongAdder> m) {
    Map<String, Long> out = new TreeMap<>();
    m.forEach((k, v) -> out.put(k, v.sum()));
    return out;
  }

  @Override
  public IndexConfig config() {
    return config;
  }

  @Override
  public String namespace() {
    return namespace;
  }

  @Override
  public void flush() {
    client.flush(client.submittedSeq());
  }

  @Override
  public boolean available() {
    return client.available();
  }

  @Override
  public Set<String> ownedPods() {
    Set<String> out = new TreeSet<>();
    if (rc.ingestMode() == IngestMode.LEASED) {
      leases.forEach(
          (pod, l) -> {
            if (l.token != null) {
              out.add(pod);
            }
          });
    } else {
      out.addAll(podIds.keySet());
    }
    return Collections.unmodifiableSet(out);
  }

  @Override
  public void close() {
    if (closed) {
      return;
    }
    flush();
    releaseLeases();
    closed = true;
    client.detach(this);
    if (ownsClient) {
      client.close();
    }
  }

  @Override
  public String toString() {
    return "RedisBlockIndex{namespace=" + namespace + ", " + config + "}";
  }

  void drop(String reason, long n) {
    if (n > 0) {
      dropped.get(reason).add(n);
    }
  }

  private void warnOnce(String key, String message) {
    if (warned.add(key)) {
      LOG.warn("kvindex: {}", message);
    }
  }

  private void bindMeters(MeterRegistry r) {
    Gauge.builder("kvroute.kvindex.pods", this, i -> i.podIds.size()).register(r);
    counter(r, "kvroute.kvindex.applied.events", "type", "stored", evStored);
    counter(r, "kvroute.kvindex.applied.events", "type", "removed", evRemoved);
    counter(r, "kvroute.kvindex.applied.events", "type", "cleared", evCleared);
    counter(r, "kvroute.kvindex.applied.events", "type", "pod_removed", evPodRemoved);
    counter(r, "kvroute.kvindex.blocks", "op", "stored", blocksStored);
    counter(r, "kvroute.kvindex.blocks", "op", "removed", blocksRemoved);
    counter(r, "kvroute.kvindex.lookups", null, null, lookups);
    counter(r, "kvroute.kvindex.redis.lookups.degraded", null, null, lookupsDegraded);
    counter(r, "kvroute.kvindex.redis.buffered", null, null, buffered);
    counter(r, "kvroute.kvindex.redis.fenced", null, null, fenced);
    counter(r, "kvroute.kvindex.redis.leases.lost", null, null, leasesLost);
    Gauge.builder("kvroute.kvindex.redis.owned.pods", this, i -> i.ownedPods().size()).register(r);
    evictions.forEach((k, v) -> counter(r, "kvroute.kvindex.evictions", "reason", k, v));
    dropped.forEach((k, v) -> counter(r, "kvroute.kvindex.apply.dropped", "reason", k, v));
  }

  private static void counter(
      MeterRegistry r, String name, String tag, String value, LongAdder adder) {
    FunctionCounter.Builder<LongAdder> b = FunctionCounter.builder(name, adder, LongAdder::sum);
    if (tag != null) {
      b.tag(tag, value);
    }
    b.register(r);
  }

  /** One {@code write.lua} call applying {@code ops} (all of this index) in order. */
  RedisFuture<List<Object>> dispatchWrites(
      RedisAsyncCommands<byte[], byte[]> c, List<WriteOp> ops) {
    int nk = 1;
    int na = 5;
    for (WriteOp op : ops) {
      nk += op.keys.length - 1;
      na += 8 + op.m;
    }
    byte[][] keys = new byte[nk][];
    byte[][] args = new byte[na][];
    keys[0] = podnKey;
    args[0] = pBytes;
    args[1] = entryTtl;
    args[2] = mappingTtl;
    args[3] = maxEntries;
    args[4] = Bytes.num(ops.size());
    int k = 1;
    int a = 5;
    for (WriteOp op : ops) {
      System.arraycopy(op.keys, 1, keys, k, op.keys.length - 1);
      k += op.keys.length - 1;
      args[a++] = new byte[] {(byte) op.kind};
      args[a++] = Bytes.num(op.pod);
      args[a++] = Bytes.utf8(op.podName);
      args[a++] = Bytes.num(op.group);
      args[a++] = Bytes.num(op.tier);
      args[a++] = op.kind == 'X' || op.token == null ? EMPTY : op.token;
      args[a++] = Bytes.num(op.n);
      args[a++] = Bytes.num(op.m);
      for (int j = 0; j < op.m; j++) {
        args[a++] = op.values[j];
      }
    }
    return client.scripts.call(c, Script.WRITE, ScriptOutputType.MULTI, keys, args);
  }

  // ------------------------------------------------------------------ ops

  /** One {@code write.lua} call. */
  static final class WriteOp extends Op {
    final char kind;
    final String podName;
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
      this.pod = pod;
      this.group = group;
      this.tier = tier;
      this.keys = keys;
      this.n = n;
      this.m = m;
      this.values = values;
      this.partial = partial;
    }

    @Override
    RedisFuture<List<Object>> dispatch(RedisAsyncCommands<byte[], byte[]> c) {
      return index.dispatchWrites(c, List.of(this));
    }

    @Override
    boolean done(List<Object> reply) {
      long status = Bytes.parseLong(reply.get(0));
      if (status == 1) {
        return !index.reRegister(this) ? dropAndTrue("unknown_pod") : false;
      }
      if (status == 2) {
        index.fenced(this);
        return true;
      }
      index.counted(kind, reply, partial);
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
      index.drop(reason, blocks);
    }
  }

  /** TTL refresh of matched keys (best effort). */
  static final class TouchOp extends Op {
    final byte[][] keys;
    final byte[] ttl;

    TouchOp(RedisIndexImpl index, byte[][] keys, byte[] ttl) {
      super(index);
      this.keys = keys;
      this.ttl = ttl;
    }

    @Override
    RedisFuture<List<Object>> dispatch(RedisAsyncCommands<byte[], byte[]> c) {
      return index.client.scripts.call(c, Script.TOUCH, ScriptOutputType.MULTI, keys, ttl);
    }

    @Override
    boolean done(List<Object> reply) {
      return true;
    }

    @Override
    void dropped(String reason) {}
  }

  /** A pending partial index block (engine blocks smaller than index blocks). */
  private static final class Partial {
    final long parentKey;
    final int[] tokens;

    Partial(long parentKey, int[] tokens) {
      this.parentKey = parentKey;
      this.tokens = tokens;
    }
  }

  /** A pod's lease under {@link IngestMode#LEASED}; guarded by its own monitor. */
  private static final class Lease {
    volatile String token;
    volatile byte[] tokenBytes;
    long renewAt;
    long nextAttempt;
    final ArrayDeque<WriteOp> backlog = new ArrayDeque<>();
  }

  /** Per-thread lookup scratch. */
  private static final class Scratch {
    int[] posU = new int[64];
    int[] uid = new int[64];
    int[] uEpoch = new int[64];
    boolean[] active = new boolean[64];
    int[] matched = new int[64];
    int[] seen = new int[64];
    int[] best = new int[64];
    int[] tierCounts = new int[64 * MAX_TIERS];
    int[] tabKeys = new int[256];
    int[] tabVals = new int[256];
    int tabMask = 255;

    void ensure(int pods) {
      if (posU.length < pods) {
        int n = Math.max(pods, posU.length * 2);
        posU = new int[n];
        uid = new int[n];
        uEpoch = new int[n];
        active = new boolean[n];
        matched = new int[n];
        seen = new int[n];
        best = new int[n];
        tierCounts = new int[n * MAX_TIERS];
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
