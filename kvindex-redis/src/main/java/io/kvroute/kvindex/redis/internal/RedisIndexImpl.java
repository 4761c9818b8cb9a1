package io.kvroute.kvindex.redis.internal;

import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.IndexStats;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.backend.IndexCounters;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.fleet.PodGroups;
import io.kvroute.kvindex.hash.RequestKeyHasher;
import io.kvroute.kvindex.redis.RedisBlockIndex;
import io.kvroute.kvindex.redis.RedisIndexConfig;
import io.kvroute.kvindex.redis.RedisIndexConfig.IngestMode;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Redis {@link io.kvroute.kvindex.BlockIndex} of one namespace: wires its parts together and
 * answers the introspection calls. Key layout, scripts and the reasons for them: the module's
 * README ({@link KeyLayout}).
 *
 * <ul>
 *   <li>{@link Writes}: the write path (request keys as the in-memory index computes them, one
 *       {@link WriteOp} per event, queued for the client's writer thread);
 *   <li>{@link Leases}: which replica writes a pod's events under {@link IngestMode#LEASED};
 *   <li>{@link Reads}: the read path (one round trip, then the longest-prefix scan);
 *   <li>{@link Pods} and {@link Tiers}: pod ids and tier codes, as registered in Redis;
 *   <li>{@link IndexCounters}: the counters and meters every block index has.
 * </ul>
 *
 * <p><b>Thread-safety.</b> Thread-safe, as its parts are (caches are concurrent maps or monitors;
 * counters are adders; lookups use per-thread scratch); one pod's writes must not overlap (as
 * {@link io.kvroute.kvindex.BlockIndex} callers guarantee).
 */
final class RedisIndexImpl implements RedisBlockIndex {
  private static final Logger LOG = LoggerFactory.getLogger(RedisIndexImpl.class);

  final RedisClientImpl client;
  private final RedisIndexConfig rc;
  private final IndexConfig config;
  private final RequestKeyHasher hasher;
  private final String namespace;
  private final boolean ownsClient;

  /** Group 0's layout; also the namespace-wide keys (custom tier names). */
  final KeyLayout keys;

  /** Each pod group's layout. */
  final KeyLayout[] layouts;

  final PodGroups groups;
  final IndexCounters counters;
  // the parts (see IndexPart), built in this order from the fields above
  final Tiers tiers;
  final Pods pods;
  final Leases leases;
  final Writes writes;
  private final Reads reads;
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
    this.groups = rc.podGroups();
    this.layouts = new KeyLayout[groups.groups()];
    for (int g = 0; g < layouts.length; g++) {
      layouts[g] = new KeyLayout(rc, config, this.namespace, g, layouts.length);
    }
    this.keys = layouts[0];
    this.counters =
        new IndexCounters(
            LOG,
            List.of("max_pods_per_key"),
            List.of("redis_unavailable", "queue_full", "fenced", "not_followed"));
    this.tiers = new Tiers(this);
    this.pods = new Pods(this);
    this.leases = new Leases(this);
    this.writes = new Writes(this);
    this.reads = new Reads(this);
    config.meterRegistry().ifPresent(this::bindMeters);
  }

  /** The layout of {@code pod}'s group. */
  KeyLayout layout(String pod) {
    return layouts[groups.group(pod)];
  }

  // ------------------------------------------------------------------ write path

  @Override
  public void blockStored(String podId, KvEvent.BlockStored event) {
    writes.blockStored(podId, event);
  }

  @Override
  public void blockRemoved(String podId, KvEvent.BlockRemoved event) {
    writes.blockRemoved(podId, event);
  }

  @Override
  public void allBlocksCleared(String podId) {
    writes.allBlocksCleared(podId);
  }

  @Override
  public void removePod(String podId) {
    writes.removePod(podId);
  }

  /** One {@code write.lua} call applying {@code ops} (all of this index and one group) in order. */
  RedisFuture<List<Object>> dispatchWrites(
      RedisClusterAsyncCommands<byte[], byte[]> c, List<WriteOp> ops) {
    return writes.dispatch(c, ops);
  }

  /** Renews the leases due (called by the client's scheduler). */
  void maintain() {
    if (!closed) {
      leases.maintain();
    }
  }

  void releaseLeases() {
    leases.releaseAll();
  }

  // ------------------------------------------------------------------ read path

  @Override
  public RequestKeyHasher keyHasher() {
    return hasher;
  }

  @Override
  public PrefixMatch lookup(long[] requestKeys, int numKeys, List<String> pods, PrefixMatch into) {
    return reads.lookup(requestKeys, numKeys, pods, into);
  }

  // ------------------------------------------------------------------ introspection

  @Override
  public Set<String> pods() {
    flush();
    Set<String> out = new TreeSet<>();
    for (KeyLayout l : layouts) {
      try {
        List<byte[]> names = client.call(c -> c.hkeys(l.podsKey), rc.commandTimeout(), "read");
        for (byte[] b : names) {
          out.add(Bytes.str(b));
        }
      } catch (RedisClientImpl.Unavailable e) {
        // that group's shard did not answer: its pods are left out
      }
    }
    return Collections.unmodifiableSet(out);
  }

  @Override
  public Map<String, Long> podEntries(String podId) {
    flush();
    try {
      int id = pods.id(podId, false);
      if (id < 0) {
        return Map.of();
      }
      return countsByTier(layout(podId), id);
    } catch (RedisClientImpl.Unavailable e) {
      return Map.of();
    }
  }

  private Map<String, Long> countsByTier(KeyLayout l, int id) {
    Map<byte[], byte[]> raw =
        client.call(c -> c.hgetall(l.counts(id)), rc.commandTimeout(), "read");
    TreeMap<Integer, Long> byLocal = new TreeMap<>();
    for (Map.Entry<byte[], byte[]> e : raw.entrySet()) {
      long count = Bytes.parseLong(e.getValue());
      if (count != 0) {
        byLocal.merge(tiers.localOfCode((int) Bytes.parseLong(e.getKey())), count, Long::sum);
      }
    }
    Map<String, Long> m = new LinkedHashMap<>();
    List<String> names = tiers.names();
    byLocal.forEach((t, c) -> m.put(names.get(t), c));
    return Collections.unmodifiableMap(m);
  }

  @Override
  public IndexStats stats() {
    flush();
    long keyCount = 0;
    long engineKeys = 0;
    long entries = 0;
    int podCount = 0;
    for (KeyLayout l : layouts) {
      try {
        Map<byte[], byte[]> st =
            client.call(c -> c.hgetall(l.statsKey), rc.commandTimeout(), "read");
        for (Map.Entry<byte[], byte[]> e : st.entrySet()) {
          String k = Bytes.str(e.getKey());
          if (k.equals("keys")) {
            keyCount += Bytes.parseLong(e.getValue());
          } else if (k.equals("engine_keys")) {
            engineKeys += Bytes.parseLong(e.getValue());
          }
        }
        List<byte[]> ids = client.call(c -> c.hkeys(l.podnKey), rc.commandTimeout(), "read");
        podCount += ids.size();
        for (byte[] id : ids) {
          for (long c : countsByTier(l, (int) Bytes.parseLong(id)).values()) {
            entries += c;
          }
        }
      } catch (RedisClientImpl.Unavailable e) {
        // zeros for that group: no information
      }
    }
    return counters
        .stats()
        .keys(keyCount)
        .entries(entries)
        .engineKeys(engineKeys)
        .pods(podCount)
        .build();
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
  public String hashTag(String podId) {
    return layout(podId).tag;
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
    if (rc.ingestMode() == IngestMode.LEASED) {
      return leases.held();
    }
    return Collections.unmodifiableSet(new TreeSet<>(pods.names()));
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

  private void bindMeters(MeterRegistry r) {
    Gauge.builder("kvroute.kvindex.pods", this, i -> i.pods.size()).register(r);
    counters.bind(r);
    IndexCounters.counter(r, "kvroute.kvindex.redis.lookups.degraded", null, null, reads.degraded);
    IndexCounters.counter(r, "kvroute.kvindex.redis.lookups.partial", null, null, reads.partial);
    IndexCounters.counter(r, "kvroute.kvindex.redis.buffered", null, null, leases.buffered);
    IndexCounters.counter(r, "kvroute.kvindex.redis.fenced", null, null, leases.fenced);
    IndexCounters.counter(r, "kvroute.kvindex.redis.leases.lost", null, null, leases.lost);
    Gauge.builder("kvroute.kvindex.redis.owned.pods", this, i -> i.ownedPods().size()).register(r);
  }
}
