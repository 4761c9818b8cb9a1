package io.kvroute.kvindex.redis.internal;

import io.kvroute.kvindex.backend.FleetCheckpoints;
import io.kvroute.kvindex.fleet.FleetConfig;
import io.kvroute.kvindex.fleet.FleetState;
import io.kvroute.kvindex.fleet.FleetView;
import io.kvroute.kvindex.fleet.InMemoryFleet;
import io.kvroute.kvindex.redis.internal.Scripts.Script;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.RedisNoScriptException;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The {@link FleetState} on Redis or Valkey (key layout and scripts: the module's README, {@code
 * fleet-*.lua}). All keys of a fleet carry the hash tag {@code {keyPrefix:fleet:<fleet>}}: one
 * slot, one shard of a Cluster.
 *
 * <p><b>Writes.</b> {@link #requestStarted}/{@link #requestFinished} update this replica's own
 * counts (exact, local) and mark the endpoint dirty; {@link #speculate} queues the request's
 * checkpoints (bounded). One writer thread sends, per cycle, the dirty endpoints' absolute counts
 * ({@code fleet-load.lua}: idempotent, so a lost write is repaired by the next) and the queued
 * checkpoints ({@code fleet-spec.lua}, once for the speculative entries with their TTL, once for
 * the routing memory of {@link #remember} under its own keys with its TTL), at once when idle and
 * coalesced while a cycle is in flight; and a heartbeat every third of the lease that renews it and
 * withdraws expired replicas. A reply saying this replica was not live (its lease ran out, or Redis
 * restarted empty) makes the next write a full snapshot. <b>Staleness</b> of what other replicas
 * see of this one: the time from a change to the acknowledgement of the cycle that carried it
 * ({@code kvroute.fleet.write.latency}), plus the reader's own round trip.
 *
 * <p><b>Reads.</b> One script call per view ({@code fleet-view.lua}: withdraws expired replicas,
 * then reads the endpoints' sums, this replica's part of them and the checkpoint keys, speculative
 * then routing memory), awaited at most {@code viewTimeout}; the fleet count of an endpoint is the
 * sum minus this replica's part (as Redis holds it, read in the same call: consistent whatever the
 * writer is doing), plus its exact local count. Slow or down: the local view, and reads stay local
 * for {@code viewBackoff}.
 *
 * <p><b>Thread-safety.</b> Thread-safe: counts are atomics in a concurrent map, the speculative
 * queue is a bounded blocking queue, the writer thread is the only sender of writes.
 */
final class RedisFleet implements FleetState {
  private static final Logger LOG = LoggerFactory.getLogger(RedisFleet.class);
  private static final int MAX_SPEC_KEYS_PER_CALL = 1024;
  private static final int ENTRY = 26;
  private static final long RETRY_NANOS = 100_000_000L;
  private static final byte[] COLD = {'c'};
  private static final byte[] COLD_FORGET = {'c', '0'};

  private final RedisClientImpl client;
  private final FleetConfig config;
  private final FleetState local; // this replica's own speculative entries
  private final byte[] prefix;
  private final byte[] replicasKey;
  private final byte[] sPrefix;
  private final byte[] aPrefix;
  private final byte[] replicaArg;
  private final byte[] leaseArg;
  private final long heartbeatNanos;

  private final ConcurrentHashMap<String, Counts> counts = new ConcurrentHashMap<>();
  private final ConcurrentLinkedQueue<String> dirty = new ConcurrentLinkedQueue<>();
  // cold requests not yet acknowledged: endpoint -> this replica's cold order (-1: forget it)
  private final ConcurrentHashMap<String, Long> pendingCold = new ConcurrentHashMap<>();
  private final AtomicLong coldOrder = new AtomicLong();
  private final ArrayBlockingQueue<SpecWrite> specQueue;
  private final AtomicLong oldestChange = new AtomicLong();
  private final AtomicLong submitted = new AtomicLong();
  private volatile long acknowledged;
  private volatile boolean resync = true; // the first write is a full snapshot
  private volatile long localUntil;
  private volatile boolean lastOk = true;
  private final AtomicInteger liveReplicas = new AtomicInteger();
  private final ReentrantLock lock = new ReentrantLock();
  private final Condition work = lock.newCondition();
  private final Condition progress = lock.newCondition();
  private final AtomicBoolean closed = new AtomicBoolean();
  private final Thread writer;

  // meters
  private final LongAdder overflow = new LongAdder();
  private final LongAdder specDropped = new LongAdder();
  private final LongAdder specUnavailable = new LongAdder();
  private final LongAdder memDropped = new LongAdder();
  private final LongAdder memUnavailable = new LongAdder();
  private final LongAdder resyncs = new LongAdder();
  private final LongAdder swept = new LongAdder();
  private final LongAdder writes = new LongAdder();
  private final Counter fleetViews;
  private final Counter localViews;
  private final Map<String, Counter> fallbacks = new HashMap<>();
  private final Timer writeLatency;

  /** A replica's counts of one endpoint. */
  private static final class Counts {
    final AtomicLong requests = new AtomicLong();
    final AtomicLong tokens = new AtomicLong();
    final AtomicBoolean dirty = new AtomicBoolean();
  }

  /** One request's checkpoints: their keys and entry identities; routing memory or speculative. */
  private record SpecWrite(byte[][] keys, byte[][] ids, boolean memory) {}

  RedisFleet(RedisClientImpl client, FleetConfig config) {
    this.client = client;
    this.config = Objects.requireNonNull(config, "config");
    this.local =
        InMemoryFleet.builder()
            .nanoClock(config.nanoClock())
            .maxSpeculativeEntries(config.maxSpeculativeEntries())
            .maxMemoryEntries(config.maxMemoryEntries())
            .build()
            .join(config.toBuilder().meterRegistry(null).build());
    String p = "{" + client.config.keyPrefix() + ":fleet:" + config.fleet() + "}:";
    this.prefix = Bytes.utf8(p);
    this.replicasKey = Bytes.utf8(p + "replicas");
    this.sPrefix = Bytes.utf8(p + "s:");
    this.aPrefix = Bytes.utf8(p + "a:");
    this.replicaArg = Bytes.utf8(config.replicaId());
    this.leaseArg = Bytes.num(config.leaseTtl().toMillis());
    this.heartbeatNanos = config.leaseTtl().toNanos() / 3;
    this.specQueue = new ArrayBlockingQueue<>(config.writeQueueCapacity());
    MeterRegistry reg = config.meterRegistry().orElse(null);
    if (reg != null) {
      fleetViews = Counter.builder("kvroute.fleet.views").tag("source", "fleet").register(reg);
      localViews = Counter.builder("kvroute.fleet.views").tag("source", "local").register(reg);
      for (String reason : List.of("timeout", "unavailable", "backoff")) {
        fallbacks.put(
            reason,
            Counter.builder("kvroute.fleet.view.fallbacks").tag("reason", reason).register(reg));
      }
      writeLatency =
          Timer.builder("kvroute.fleet.write.latency")
              .description("from a change of this replica to Redis acknowledging it")
              .publishPercentiles(0.5, 0.99)
              .register(reg);
      FunctionCounter.builder("kvroute.fleet.endpoints.overflow", overflow, LongAdder::sum)
          .register(reg);
      FunctionCounter.builder("kvroute.fleet.speculative.dropped", specDropped, LongAdder::sum)
          .tag("reason", "queue_full")
          .register(reg);
      FunctionCounter.builder("kvroute.fleet.speculative.dropped", specUnavailable, LongAdder::sum)
          .tag("reason", "redis_unavailable")
          .register(reg);
      FunctionCounter.builder("kvroute.fleet.memory.dropped", memDropped, LongAdder::sum)
          .tag("reason", "queue_full")
          .register(reg);
      FunctionCounter.builder("kvroute.fleet.memory.dropped", memUnavailable, LongAdder::sum)
          .tag("reason", "redis_unavailable")
          .register(reg);
      Gauge.builder("kvroute.fleet.speculative.queue.depth", specQueue, ArrayBlockingQueue::size)
          .register(reg);
      FunctionCounter.builder("kvroute.fleet.resyncs", resyncs, LongAdder::sum).register(reg);
      FunctionCounter.builder("kvroute.fleet.replicas.swept", swept, LongAdder::sum).register(reg);
      FunctionCounter.builder("kvroute.fleet.writes", writes, LongAdder::sum).register(reg);
      Gauge.builder("kvroute.fleet.replicas", liveReplicas, AtomicInteger::get).register(reg);
    } else {
      fleetViews = null;
      localViews = null;
      writeLatency = null;
    }
    this.writer = new Thread(this::writeLoop, "kvroute-fleet-writer-" + config.fleet());
    writer.setDaemon(true);
    writer.start();
  }

  private long now() {
    return config.nanoClock().getAsLong();
  }

  @Override
  public String replicaId() {
    return config.replicaId();
  }

  @Override
  public FleetConfig config() {
    return config;
  }

  // ------------------------------------------------------------------ writes

  @Override
  public void requestStarted(String endpointId, long tokens) {
    change(endpointId, 1, Math.max(0, tokens));
  }

  @Override
  public void requestFinished(String endpointId, long tokens) {
    change(endpointId, -1, -Math.max(0, tokens));
  }

  private void change(String endpointId, long dr, long dt) {
    Objects.requireNonNull(endpointId, "endpointId");
    if (closed.get()) {
      return;
    }
    Counts c = counts.get(endpointId);
    if (c == null) {
      if (dr < 0) {
        return;
      }
      if (counts.size() >= config.maxEndpoints()) {
        counts
            .entrySet()
            .removeIf(
                e ->
                    e.getValue().requests.get() == 0
                        && e.getValue().tokens.get() == 0
                        && !e.getValue().dirty.get());
        if (counts.size() >= config.maxEndpoints()) {
          overflow.increment();
          return;
        }
      }
      c = counts.computeIfAbsent(endpointId, k -> new Counts());
    }
    c.requests.getAndUpdate(v -> Math.max(0, v + dr));
    c.tokens.getAndUpdate(v -> Math.max(0, v + dt));
    oldestChange.compareAndSet(0, now());
    if (c.dirty.compareAndSet(false, true)) {
      dirty.add(endpointId);
    }
    submitted.incrementAndGet();
    signal();
  }

  @Override
  public void speculate(String endpointId, long[] requestKeys, int numKeys) {
    Objects.requireNonNull(endpointId, "endpointId");
    Objects.checkFromIndexSize(0, numKeys, requestKeys.length);
    if (closed.get() || numKeys == 0) {
      return;
    }
    local.speculate(endpointId, requestKeys, numKeys);
    enqueue(endpointId, requestKeys, numKeys, false);
  }

  @Override
  public void remember(String endpointId, long[] prefixHashes, int numHashes) {
    Objects.requireNonNull(endpointId, "endpointId");
    Objects.checkFromIndexSize(0, numHashes, prefixHashes.length);
    if (closed.get() || numHashes == 0 || config.memoryTtl().isZero()) {
      return;
    }
    local.remember(endpointId, prefixHashes, numHashes);
    enqueue(endpointId, prefixHashes, numHashes, true);
  }

  @Override
  public void coldRouted(String endpointId) {
    Objects.requireNonNull(endpointId, "endpointId");
    if (closed.get()) {
      return;
    }
    if (!pendingCold.containsKey(endpointId) && pendingCold.size() >= config.maxEndpoints()) {
      overflow.increment();
      return;
    }
    local.coldRouted(endpointId);
    pendingCold.put(endpointId, coldOrder.incrementAndGet());
    oldestChange.compareAndSet(0, now());
    submitted.incrementAndGet();
    signal();
  }

  private void enqueue(String endpointId, long[] k, int n, boolean memory) {
    int stride = config.speculativeStride();
    int m = FleetCheckpoints.count(n, stride);
    byte[][] keys = new byte[m][];
    byte[][] ids = new byte[m][];
    long ep = FleetCheckpoints.endpointHash(endpointId);
    byte[] kp = memory ? aPrefix : sPrefix;
    for (int c = 0; c < m; c++) {
      int q = FleetCheckpoints.position(c, stride);
      int t = FleetCheckpoints.tail(q, n, stride);
      keys[c] = Bytes.key(kp, k[q]);
      byte[] id = new byte[20];
      Bytes.putLong(id, 0, ep);
      id[8] = (byte) (t >>> 24);
      id[9] = (byte) (t >>> 16);
      id[10] = (byte) (t >>> 8);
      id[11] = (byte) t;
      Bytes.putLong(id, 12, k[t]);
      ids[c] = id;
    }
    if (!specQueue.offer(new SpecWrite(keys, ids, memory))) {
      (memory ? memDropped : specDropped).increment();
      return;
    }
    oldestChange.compareAndSet(0, now());
    submitted.incrementAndGet();
    signal();
  }

  private void signal() {
    lock.lock();
    try {
      work.signal();
    } finally {
      lock.unlock();
    }
  }

  private void writeLoop() {
    long lastLoad = 0;
    long retryAt = 0;
    while (!closed.get()) {
      lock.lock();
      try {
        long now = now();
        long wait;
        if (now - retryAt < 0) { // the last cycle failed: not before its retry time
          wait = retryAt - now;
        } else if (!dirty.isEmpty() || !specQueue.isEmpty() || !pendingCold.isEmpty() || resync) {
          wait = 0;
        } else {
          wait = heartbeatNanos - (now - lastLoad);
        }
        if (wait > 0) {
          work.awaitNanos(wait);
          continue; // woken by a change or timed out: decide again
        }
      } catch (InterruptedException e) {
        if (closed.get()) {
          break;
        }
        continue;
      } finally {
        lock.unlock();
      }
      if (closed.get()) {
        break;
      }
      try {
        long cycleSeq = submitted.get();
        long since = oldestChange.getAndSet(0);
        boolean loadDue =
            resync
                || !dirty.isEmpty()
                || !pendingCold.isEmpty()
                || now() - lastLoad >= heartbeatNanos;
        boolean ok = cycle(loadDue);
        if (loadDue && ok) {
          lastLoad = now();
        }
        if (ok) {
          if (since != 0 && writeLatency != null) {
            writeLatency.record(now() - since, TimeUnit.NANOSECONDS);
          }
          lock.lock();
          try {
            acknowledged = Math.max(acknowledged, cycleSeq);
            progress.signalAll();
          } finally {
            lock.unlock();
          }
        } else {
          // the server did not answer: retry after a pause, not in a loop; the changes still wait
          if (since != 0) {
            oldestChange.compareAndSet(0, since);
          }
          retryAt = now() + RETRY_NANOS;
        }
      } catch (RuntimeException e) {
        LOG.warn("kvroute fleet: write cycle failed unexpectedly", e);
        retryAt = now() + RETRY_NANOS;
      }
    }
  }

  /** One write cycle: the counts (if due) and the queued checkpoints; whether all were applied. */
  private boolean cycle(boolean loadDue) {
    RedisClusterAsyncCommands<byte[], byte[]> c = client.reads();
    List<SpecWrite> specs = new ArrayList<>();
    int specKeys = 0;
    SpecWrite sw;
    while (specKeys < MAX_SPEC_KEYS_PER_CALL && (sw = specQueue.poll()) != null) {
      specs.add(sw);
      specKeys += sw.keys().length;
    }
    if (c == null) {
      failed(specs, loadDue);
      client.health.failed("fleet", null);
      return false;
    }
    // the load call
    RedisFuture<List<Object>> load = null;
    char mode = 0;
    Map<String, long[]> sent = null;
    List<Map.Entry<String, Long>> coldSent = List.of();
    if (loadDue) {
      mode = resync ? 'F' : 'D';
      sent = new HashMap<>();
      if (mode == 'F') {
        resync = false;
        dirty.clear();
        for (Map.Entry<String, Counts> e : counts.entrySet()) {
          e.getValue().dirty.set(false);
        }
        for (Map.Entry<String, Counts> e : counts.entrySet()) {
          long r = e.getValue().requests.get();
          long t = e.getValue().tokens.get();
          if (r != 0 || t != 0) {
            sent.put(e.getKey(), new long[] {r, t});
          }
        }
      } else {
        String ep;
        while ((ep = dirty.poll()) != null) {
          Counts cnt = counts.get(ep);
          long r = 0;
          long t = 0;
          if (cnt != null) {
            cnt.dirty.set(false);
            r = cnt.requests.get();
            t = cnt.tokens.get();
          }
          sent.put(ep, new long[] {r, t});
        }
      }
      // the cold requests, in this replica's order
      coldSent = new ArrayList<>(pendingCold.entrySet());
      coldSent.sort((x, y) -> Long.compare(Math.abs(x.getValue()), Math.abs(y.getValue())));
      byte[][] args = new byte[4 + 2 * sent.size() + 2 * coldSent.size()][];
      args[0] = prefix;
      args[1] = replicaArg;
      args[2] = leaseArg;
      args[3] = new byte[] {(byte) mode};
      int a = 4;
      for (Map.Entry<String, long[]> e : sent.entrySet()) {
        args[a++] = Bytes.utf8(e.getKey());
        args[a++] = Bytes.utf8(e.getValue()[0] + " " + e.getValue()[1]);
      }
      for (Map.Entry<String, Long> e : coldSent) {
        args[a++] = Bytes.utf8(e.getKey());
        args[a++] = e.getValue() < 0 ? COLD_FORGET : COLD;
      }
      load = dispatch(c, Script.FLEET_LOAD, new byte[][] {replicasKey}, args);
    }
    List<SpecWrite> spec = new ArrayList<>();
    List<SpecWrite> mem = new ArrayList<>();
    for (SpecWrite w : specs) {
      (w.memory() ? mem : spec).add(w);
    }
    EntriesCall specCall = entries(c, spec, config.speculativeTtl());
    EntriesCall memCall = entries(c, mem, config.memoryTtl());
    boolean ok = true;
    if (load != null) {
      writes.increment();
      try {
        List<Object> r = awaitScript(c, load, Script.FLEET_LOAD, new byte[][] {replicasKey}, null);
        long present = Bytes.parseLong(r.get(0));
        swept.add(Bytes.parseLong(r.get(1)));
        liveReplicas.set((int) Bytes.parseLong(r.get(2)));
        for (Map.Entry<String, Long> e : coldSent) { // acknowledged, unless sent again since
          pendingCold.remove(e.getKey(), e.getValue());
        }
        if (present == 0 && mode != 'F') {
          // our lease ran out (or Redis lost our state): publish everything again
          resync = true;
          resyncs.increment();
        }
        lastOk = true;
      } catch (RedisClientImpl.Unavailable e) {
        ok = false;
        resync = true; // what Redis holds of us is unknown: send a full snapshot next
        lastOk = false;
      }
    }
    for (EntriesCall call : new EntriesCall[] {specCall, memCall}) {
      if (call == null) {
        continue;
      }
      try {
        awaitScript(c, call.future(), Script.FLEET_SPEC, call.keys(), call.args());
      } catch (RedisClientImpl.Unavailable e) {
        (call == memCall ? memUnavailable : specUnavailable).add(call.requests());
        ok = false;
        lastOk = false;
      }
    }
    return ok;
  }

  /** A {@code fleet-spec.lua} call in flight. */
  private record EntriesCall(
      RedisFuture<Object> future, byte[][] keys, byte[][] args, int requests) {}

  /** Sends {@code batch}'s checkpoints, their entries living {@code ttl}; null if none. */
  private EntriesCall entries(
      RedisClusterAsyncCommands<byte[], byte[]> c, List<SpecWrite> batch, Duration ttl) {
    if (batch.isEmpty()) {
      return null;
    }
    int n = 0;
    for (SpecWrite w : batch) {
      n += w.keys().length;
    }
    byte[][] keys = new byte[n][];
    byte[][] args = new byte[2 + n][];
    args[0] = Bytes.num(ttl.toMillis());
    args[1] = Bytes.num(config.maxEntriesPerKey());
    int k = 0;
    for (SpecWrite w : batch) {
      for (int i = 0; i < w.keys().length; i++) {
        keys[k] = w.keys()[i];
        args[2 + k] = w.ids()[i];
        k++;
      }
    }
    writes.increment();
    return new EntriesCall(dispatch(c, Script.FLEET_SPEC, keys, args), keys, args, batch.size());
  }

  private void failed(List<SpecWrite> specs, boolean loadDue) {
    for (SpecWrite w : specs) {
      (w.memory() ? memUnavailable : specUnavailable).increment();
    }
    if (loadDue) {
      resync = true;
    }
    lastOk = false;
  }

  @SuppressWarnings("unchecked")
  private <T> RedisFuture<T> dispatch(
      RedisClusterAsyncCommands<byte[], byte[]> c, Script s, byte[][] keys, byte[][] args) {
    return (RedisFuture<T>) client.scripts.call(c, s, ScriptOutputType.MULTI, keys, args);
  }

  /** Awaits a script's reply; on NOSCRIPT sends it whole once ({@code args} null: load's). */
  @SuppressWarnings("unchecked")
  private <T> T awaitScript(
      RedisClusterAsyncCommands<byte[], byte[]> c,
      RedisFuture<?> f,
      Script s,
      byte[][] keys,
      byte[][] args) {
    try {
      return (T) client.await(f, client.config.commandTimeout(), "fleet");
    } catch (RedisNoScriptException e) {
      client.reloadScripts();
      if (args == null) { // a load: resend as a full snapshot at the next cycle
        resync = true;
        throw new RedisClientImpl.Unavailable(e);
      }
      return (T)
          client.await(
              client.scripts.eval(c, s, ScriptOutputType.MULTI, keys, args),
              client.config.commandTimeout(),
              "fleet");
    }
  }

  // ------------------------------------------------------------------ reads

  private static final long[] NO_KEYS = new long[0];

  @Override
  public FleetView view(List<String> endpointIds, long[] requestKeys, int numKeys) {
    return view(endpointIds, requestKeys, numKeys, NO_KEYS, 0);
  }

  @Override
  public FleetView view(
      List<String> endpointIds,
      long[] requestKeys,
      int numKeys,
      long[] prefixHashes,
      int numHashes) {
    Objects.requireNonNull(endpointIds, "endpointIds");
    checkKeys(requestKeys, numKeys);
    checkKeys(prefixHashes, numHashes);
    int nh = memoryShared() ? numHashes : 0;
    long start = now();
    if (start - localUntil < 0) {
      return fallback("backoff", endpointIds, requestKeys, numKeys, prefixHashes, nh);
    }
    RedisClusterAsyncCommands<byte[], byte[]> c = client.reads();
    if (c == null) {
      return unreachable("unavailable", endpointIds, requestKeys, numKeys, prefixHashes, nh, start);
    }
    byte[][] keys = viewKeys(requestKeys, numKeys, prefixHashes, nh);
    byte[][] args = viewArgs(endpointIds);
    Map<String, Long> pendingAtRead = pendingCold();
    long deadline = start + config.viewTimeout().toNanos();
    try {
      List<Object> r;
      try {
        r = client.await(dispatch(c, Script.FLEET_VIEW, keys, args), left(deadline), "fleet");
      } catch (RedisNoScriptException e) {
        r =
            client.await(
                client.scripts.eval(c, Script.FLEET_VIEW, ScriptOutputType.MULTI, keys, args),
                left(deadline),
                "fleet");
      }
      return merge(endpointIds, requestKeys, numKeys, prefixHashes, nh, r, pendingAtRead);
    } catch (RedisClientImpl.Unavailable e) {
      String reason = e.getCause() instanceof TimeoutException ? "timeout" : "unavailable";
      return unreachable(reason, endpointIds, requestKeys, numKeys, prefixHashes, nh, start);
    }
  }

  @Override
  public CompletableFuture<FleetView> viewAsync(
      List<String> endpointIds, long[] requestKeys, int numKeys) {
    return viewAsync(endpointIds, requestKeys, numKeys, NO_KEYS, 0);
  }

  @Override
  public CompletableFuture<FleetView> viewAsync(
      List<String> endpointIds,
      long[] requestKeys,
      int numKeys,
      long[] prefixHashes,
      int numHashes) {
    Objects.requireNonNull(endpointIds, "endpointIds");
    checkKeys(requestKeys, numKeys);
    checkKeys(prefixHashes, numHashes);
    int nh = memoryShared() ? numHashes : 0;
    long start = now();
    if (start - localUntil < 0) {
      return CompletableFuture.completedFuture(
          fallback("backoff", endpointIds, requestKeys, numKeys, prefixHashes, nh));
    }
    RedisClusterAsyncCommands<byte[], byte[]> c = client.reads();
    if (c == null) {
      return CompletableFuture.completedFuture(
          unreachable("unavailable", endpointIds, requestKeys, numKeys, prefixHashes, nh, start));
    }
    long[] keysCopy = numKeys == 0 ? NO_KEYS : java.util.Arrays.copyOf(requestKeys, numKeys);
    long[] hashesCopy = nh == 0 ? NO_KEYS : java.util.Arrays.copyOf(prefixHashes, nh);
    List<String> eps = List.copyOf(endpointIds);
    byte[][] keys = viewKeys(keysCopy, numKeys, hashesCopy, nh);
    byte[][] args = viewArgs(eps);
    Map<String, Long> pendingAtRead = pendingCold();
    CompletableFuture<List<Object>> f =
        this.<List<Object>>dispatch(c, Script.FLEET_VIEW, keys, args).toCompletableFuture();
    return f.orTimeout(config.viewTimeout().toNanos(), TimeUnit.NANOSECONDS)
        .handle(
            (r, t) -> {
              if (t == null) {
                client.health.ok();
                return merge(eps, keysCopy, numKeys, hashesCopy, nh, r, pendingAtRead);
              }
              Throwable cause =
                  t instanceof java.util.concurrent.CompletionException ? t.getCause() : t;
              if (cause instanceof RedisNoScriptException) {
                client.scheduler().execute(client::reloadScripts);
              } else {
                client.health.failed("fleet", cause);
              }
              String reason = cause instanceof TimeoutException ? "timeout" : "unavailable";
              return unreachable(reason, eps, keysCopy, numKeys, hashesCopy, nh, start);
            });
  }

  private boolean memoryShared() {
    return !config.memoryTtl().isZero();
  }

  private static void checkKeys(long[] requestKeys, int numKeys) {
    if (numKeys > 0) {
      Objects.checkFromIndexSize(0, numKeys, requestKeys.length);
    } else if (numKeys < 0) {
      throw new IndexOutOfBoundsException("numKeys " + numKeys);
    }
  }

  private Duration left(long deadline) {
    return Duration.ofNanos(Math.max(1, deadline - now()));
  }

  /** The view's keys: the replicas, the speculative checkpoint keys, the memory's. */
  private byte[][] viewKeys(long[] requestKeys, int numKeys, long[] hashes, int nh) {
    int stride = config.speculativeStride();
    int m = FleetCheckpoints.count(numKeys, stride);
    int mh = FleetCheckpoints.count(nh, stride);
    byte[][] keys = new byte[1 + m + mh][];
    keys[0] = replicasKey;
    for (int c = 0; c < m; c++) {
      keys[1 + c] = Bytes.key(sPrefix, requestKeys[FleetCheckpoints.position(c, stride)]);
    }
    for (int c = 0; c < mh; c++) {
      keys[1 + m + c] = Bytes.key(aPrefix, hashes[FleetCheckpoints.position(c, stride)]);
    }
    return keys;
  }

  private byte[][] viewArgs(List<String> eps) {
    byte[][] args = new byte[3 + eps.size()][];
    args[0] = prefix;
    args[1] = replicaArg;
    args[2] = Bytes.num(eps.size());
    for (int i = 0; i < eps.size(); i++) {
      args[3 + i] = Bytes.utf8(eps.get(i));
    }
    return args;
  }

  /**
   * This replica's cold requests not acknowledged yet, copied before a view's read is sent: the
   * writer may have them acknowledged (and forgotten from {@link #pendingCold}) before the reply
   * comes back, by a write Redis applied after the read.
   */
  private Map<String, Long> pendingCold() {
    return pendingCold.isEmpty() ? Map.of() : Map.copyOf(pendingCold);
  }

  /**
   * The fleet view from a {@code fleet-view.lua} reply, this replica's exact state merged in
   * ({@code pendingAtRead}: its cold requests not acknowledged when the read was sent).
   */
  private FleetView merge(
      List<String> eps,
      long[] keys,
      int n,
      long[] hashes,
      int nh,
      List<Object> r,
      Map<String, Long> pendingAtRead) {
    long serverNow = Bytes.parseLong(r.get(0));
    List<?> lr = (List<?>) r.get(1);
    List<?> lt = (List<?>) r.get(2);
    List<?> mine = (List<?>) r.get(3); // this replica's part of the sums, read in the same call
    List<?> coldR = (List<?>) r.get(4);
    int size = eps.size();
    long[] req = new long[size];
    long[] tok = new long[size];
    int[] sp = new int[size];
    int[] mem = new int[size];
    long[] cold = new long[size];
    long maxCold = 0;
    for (int i = 0; i < size; i++) {
      cold[i] = coldR.get(i) == null ? 0 : Bytes.parseLong(coldR.get(i));
      maxCold = Math.max(maxCold, cold[i]);
    }
    for (int i = 0; i < size; i++) {
      String e = eps.get(i);
      Counts own = counts.get(e);
      long sumR = lr.get(i) == null ? 0 : Bytes.parseLong(lr.get(i));
      long sumT = lt.get(i) == null ? 0 : Bytes.parseLong(lt.get(i));
      long mineR = 0;
      long mineT = 0;
      if (mine.get(i) instanceof byte[] m) {
        String[] rt = Bytes.str(m).split(" ");
        mineR = Long.parseLong(rt[0]);
        mineT = Long.parseLong(rt[1]);
      }
      long ownR = own == null ? 0 : own.requests.get();
      long ownT = own == null ? 0 : own.tokens.get();
      // the others' counts as Redis holds them, plus this replica's own, exact
      req[i] = Math.max(0, sumR - mineR) + ownR;
      tok[i] = Math.max(0, sumT - mineT) + ownT;
    }
    if (n > 0 || nh > 0) {
      Map<Long, Integer> byHash = new HashMap<>(size * 2);
      for (int i = size - 1; i >= 0; i--) {
        byHash.put(FleetCheckpoints.endpointHash(eps.get(i)), i);
      }
      int m = FleetCheckpoints.count(n, config.speculativeStride());
      held(r, 5, keys, n, byHash, serverNow, sp);
      held(r, 5 + m, hashes, nh, byHash, serverNow, mem);
      // this replica's own entries, exact whatever the writer is doing
      FleetView own = local.localView(eps, keys, n, hashes, nh);
      Map<String, Integer> pos = new HashMap<>(size * 2);
      for (int i = size - 1; i >= 0; i--) {
        pos.put(eps.get(i), i);
      }
      for (int i = 0; i < size; i++) {
        int first = pos.get(eps.get(i));
        sp[i] = Math.max(sp[first], own.speculativeBlocks(i));
        mem[i] = Math.max(mem[first], own.rememberedBlocks(i));
      }
    }
    if (!pendingCold.isEmpty() || !pendingAtRead.isEmpty()) {
      // this replica's cold requests Redis had not acknowledged when the read was sent (or has
      // not now): later than any it holds
      FleetView own = local.localView(eps, NO_KEYS, 0);
      for (int i = 0; i < size; i++) {
        Long p = pendingCold.get(eps.get(i));
        if (p == null) {
          p = pendingAtRead.get(eps.get(i));
        }
        if (p != null) {
          cold[i] = p < 0 ? 0 : maxCold + own.lastColdRouted(i);
        }
      }
    }
    if (fleetViews != null) {
      fleetViews.increment();
    }
    return FleetView.builder(FleetView.Source.FLEET, eps)
        .inFlight(req, tok)
        .speculativeBlocks(sp)
        .rememberedBlocks(mem)
        .lastColdRouted(cold)
        .build();
  }

  /**
   * The blocks held per endpoint by the entries of the checkpoint keys of {@code keys[0..n)}, read
   * at {@code r[from..]} (one value per checkpoint).
   */
  private void held(
      List<Object> r,
      int from,
      long[] keys,
      int n,
      Map<Long, Integer> byHash,
      long serverNow,
      int[] out) {
    int stride = config.speculativeStride();
    for (int c = 0, m = FleetCheckpoints.count(n, stride); c < m && from + c < r.size(); c++) {
      Object v = r.get(from + c);
      if (!(v instanceof byte[] b)) {
        continue;
      }
      int q = FleetCheckpoints.position(c, stride);
      for (int off = 0; off + ENTRY <= b.length; off += ENTRY) {
        long exp = 0;
        for (int j = 0; j < 6; j++) {
          exp = (exp << 8) | (b[off + j] & 0xff);
        }
        if (exp <= serverNow) {
          continue;
        }
        Integer i = byHash.get(Bytes.getLong(b, off + 6));
        if (i == null) {
          continue;
        }
        int tail =
            ((b[off + 14] & 0xff) << 24)
                | ((b[off + 15] & 0xff) << 16)
                | ((b[off + 16] & 0xff) << 8)
                | (b[off + 17] & 0xff);
        long tailKey = Bytes.getLong(b, off + 18);
        out[i] = Math.max(out[i], FleetCheckpoints.held(keys, n, q, tail, tailKey));
      }
    }
  }

  private FleetView unreachable(
      String reason, List<String> eps, long[] keys, int n, long[] hashes, int nh, long start) {
    localUntil = start + config.viewBackoff().toNanos();
    return fallback(reason, eps, keys, n, hashes, nh);
  }

  private FleetView fallback(
      String reason, List<String> eps, long[] keys, int n, long[] hashes, int nh) {
    Counter f = fallbacks.get(reason);
    if (f != null) {
      f.increment();
    }
    return own(eps, keys, n, hashes, nh);
  }

  @Override
  public FleetView localView(List<String> endpointIds, long[] requestKeys, int numKeys) {
    return localView(endpointIds, requestKeys, numKeys, NO_KEYS, 0);
  }

  @Override
  public FleetView localView(
      List<String> endpointIds,
      long[] requestKeys,
      int numKeys,
      long[] prefixHashes,
      int numHashes) {
    Objects.requireNonNull(endpointIds, "endpointIds");
    checkKeys(requestKeys, numKeys);
    checkKeys(prefixHashes, numHashes);
    return own(endpointIds, requestKeys, numKeys, prefixHashes, numHashes);
  }

  private FleetView own(List<String> eps, long[] keys, int n, long[] hashes, int nh) {
    int size = eps.size();
    long[] req = new long[size];
    long[] tok = new long[size];
    for (int i = 0; i < size; i++) {
      Counts c = counts.get(eps.get(i));
      if (c != null) {
        req[i] = c.requests.get();
        tok[i] = c.tokens.get();
      }
    }
    FleetView entries = local.localView(eps, keys, n, hashes, nh);
    int[] sp = new int[size];
    int[] mem = new int[size];
    long[] cold = new long[size];
    for (int i = 0; i < size; i++) {
      sp[i] = entries.speculativeBlocks(i);
      mem[i] = entries.rememberedBlocks(i);
      cold[i] = entries.lastColdRouted(i);
    }
    if (localViews != null) {
      localViews.increment();
    }
    return FleetView.builder(FleetView.Source.LOCAL, eps)
        .inFlight(req, tok)
        .speculativeBlocks(sp)
        .rememberedBlocks(mem)
        .lastColdRouted(cold)
        .build();
  }

  // ------------------------------------------------------------------ lifecycle

  @Override
  public void removeEndpoint(String endpointId) {
    Counts c = counts.get(endpointId);
    if (c != null) {
      c.requests.set(0);
      c.tokens.set(0);
      if (c.dirty.compareAndSet(false, true)) {
        dirty.add(endpointId);
      }
      submitted.incrementAndGet();
      signal();
    }
    if (local.localView(List.of(endpointId), NO_KEYS, 0).lastColdRouted(0) != 0
        || pendingCold.containsKey(endpointId)) {
      pendingCold.put(endpointId, -coldOrder.incrementAndGet());
      submitted.incrementAndGet();
      signal();
    }
    local.removeEndpoint(endpointId);
  }

  @Override
  public boolean flush(Duration timeout) {
    long target = submitted.get();
    long deadline = now() + timeout.toNanos();
    lock.lock();
    try {
      while (acknowledged < target && !closed.get()) {
        long left = deadline - now();
        if (left <= 0) {
          return false;
        }
        work.signal();
        progress.awaitNanos(Math.min(left, 50_000_000L));
      }
      return acknowledged >= target;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    } finally {
      lock.unlock();
    }
  }

  @Override
  public boolean available() {
    return lastOk && client.available() && now() - localUntil >= 0;
  }

  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    writer.interrupt();
    try {
      writer.join(client.config.commandTimeout().toMillis() * 2 + 1000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    // leave: withdraw this replica's counts at once
    RedisClusterAsyncCommands<byte[], byte[]> c = client.reads();
    if (c != null) {
      try {
        byte[][] args = {prefix, replicaArg, leaseArg, new byte[] {'L'}};
        client.await(
            client.scripts.eval(
                c, Script.FLEET_LOAD, ScriptOutputType.MULTI, new byte[][] {replicasKey}, args),
            client.config.commandTimeout(),
            "fleet");
      } catch (RuntimeException e) {
        LOG.debug("kvroute fleet: leaving failed; the lease will expire", e);
      }
    }
    local.close();
    client.detach(this);
  }

  @Override
  public String toString() {
    return "RedisFleet{fleet=" + config.fleet() + ", replica=" + config.replicaId() + "}";
  }
}
