package io.kvroute.kvindex.fleet;

import io.kvroute.kvindex.backend.FleetCheckpoints;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;

/**
 * The shared state of a fleet whose replicas live in one process (the fleet replay, tests, several
 * schedulers in one gateway), with a modelled staleness: what replica A records becomes visible to
 * the other replicas {@code visibilityDelay} later on the fleet's clock (A sees its own at once),
 * as a shared store's propagation would. Every replica {@link #join joins} with its own {@link
 * FleetConfig}; views always answer {@link FleetView.Source#FLEET}.
 *
 * <p>Deterministic: no threads; changes become visible when a replica next reads or writes after
 * their time. With the fleet replay's virtual clock as {@code nanoClock}, the staleness is in
 * virtual time.
 *
 * <p><b>Bounds.</b> Speculative entries: {@code maxSpeculativeEntries} over the whole fleet (the
 * oldest go first, counted in {@code kvroute.fleet.speculative.evicted}); routing-memory entries:
 * {@code maxMemoryEntries} likewise ({@code kvroute.fleet.memory.evicted}); each replica's tracked
 * endpoints: its {@link FleetConfig#maxEndpoints()}; changes not yet visible: those of one {@code
 * visibilityDelay}.
 *
 * <p><b>Thread-safety.</b> Thread-safe: one monitor guards the tables (held for a few map
 * operations per call, or one per checkpoint).
 */
public final class InMemoryFleet {
  private static final long[] NO_KEYS = new long[0];
  private final long delayNanos;
  private final LongSupplier clock;
  private final Object lock = new Object();
  // guarded by lock
  private final Map<String, Replica> replicas = new HashMap<>();
  private final Map<String, long[]> aggregate = new HashMap<>();
  private final ArrayDeque<Change> pending = new ArrayDeque<>();
  private final Entries spec;
  private final Entries memory;
  // cold routing: the fleet's order, the latest visible per endpoint, and changes not yet visible
  private long coldSeq;
  private final HashMap<String, Long> cold = new HashMap<>();
  private final ArrayDeque<ColdChange> pendingCold = new ArrayDeque<>();

  private InMemoryFleet(Builder b) {
    this.delayNanos = b.visibilityDelay.toNanos();
    this.clock = b.nanoClock;
    this.spec = new Entries(b.maxSpeculativeEntries);
    this.memory = new Entries(b.maxMemoryEntries);
  }

  /**
   * A builder (no delay, the system clock, 1,000,000 speculative and 1,000,000 routing-memory
   * entries).
   */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * A replica joins the fleet with its own configuration (its clock is the fleet's).
   *
   * @throws IllegalStateException if a replica of that id is in the fleet
   */
  public FleetState join(FleetConfig config) {
    Objects.requireNonNull(config, "config");
    synchronized (lock) {
      if (replicas.containsKey(config.replicaId())) {
        throw new IllegalStateException(
            "replica " + config.replicaId() + " already joined this fleet");
      }
      Replica r = new Replica(config);
      replicas.put(config.replicaId(), r);
      return r;
    }
  }

  /**
   * Ends a replica's lease as if it had died: its in-flight counts leave every view at once. Its
   * handle keeps working and publishes its counts again with its next change (a replica that was
   * only partitioned).
   */
  public void expire(String replicaId) {
    synchronized (lock) {
      Replica r = replicas.get(replicaId);
      if (r != null) {
        withdraw(r);
        r.expired = true;
      }
    }
  }

  /** The replicas in the fleet. */
  public Set<String> replicas() {
    synchronized (lock) {
      return Collections.unmodifiableSet(new TreeSet<>(replicas.keySet()));
    }
  }

  /** How long a replica's changes take to become visible to the others. */
  public Duration visibilityDelay() {
    return Duration.ofNanos(delayNanos);
  }

  /** Speculative entries held, fleet-wide. */
  public int speculativeEntries() {
    synchronized (lock) {
      spec.expire(clock.getAsLong());
      return spec.live;
    }
  }

  /** Routing-memory entries held, fleet-wide. */
  public int memoryEntries() {
    synchronized (lock) {
      memory.expire(clock.getAsLong());
      return memory.live;
    }
  }

  // ------------------------------------------------------------------ shared tables (under lock)

  private record Change(long visibleAt, Replica replica, String endpoint, long r, long t) {}

  /** A cold request's order, or 0 for an endpoint forgotten. */
  private record ColdChange(long visibleAt, String endpoint, long seq, int maxEndpoints) {}

  /** Publishes replica {@code r}'s absolute counts for an endpoint (visible after the delay). */
  private void publish(Replica r, String endpoint, long req, long tok, long now) {
    if (delayNanos <= 0) {
      apply(r, endpoint, req, tok);
    } else {
      applyDue(now);
      pending.addLast(new Change(now + delayNanos, r, endpoint, req, tok));
    }
  }

  private void applyDue(long now) {
    ColdChange cc;
    while ((cc = pendingCold.peekFirst()) != null && cc.visibleAt() - now <= 0) {
      pendingCold.removeFirst();
      applyCold(cc);
    }
    Change c;
    while ((c = pending.peekFirst()) != null && c.visibleAt() - now <= 0) {
      pending.removeFirst();
      if (replicas.get(c.replica().config.replicaId()) == c.replica() && !c.replica().expired) {
        apply(c.replica(), c.endpoint(), c.r(), c.t());
      }
    }
  }

  private void apply(Replica r, String endpoint, long req, long tok) {
    long[] old = r.published.get(endpoint);
    long dr = req - (old == null ? 0 : old[0]);
    long dt = tok - (old == null ? 0 : old[1]);
    if (req == 0 && tok == 0) {
      r.published.remove(endpoint);
    } else if (old == null) {
      r.published.put(endpoint, new long[] {req, tok});
    } else {
      old[0] = req;
      old[1] = tok;
    }
    if (dr != 0 || dt != 0) {
      long[] a = aggregate.computeIfAbsent(endpoint, k -> new long[2]);
      a[0] += dr;
      a[1] += dt;
      if (a[0] == 0 && a[1] == 0) {
        aggregate.remove(endpoint);
      }
    }
  }

  private void applyCold(ColdChange c) {
    if (c.seq() == 0) {
      cold.remove(c.endpoint());
      return;
    }
    cold.put(c.endpoint(), c.seq());
    if (cold.size() > c.maxEndpoints()) { // the endpoint that got one longest ago goes
      dropOldest(cold);
    }
  }

  private static void dropOldest(Map<String, Long> m) {
    String oldest = null;
    long min = Long.MAX_VALUE;
    for (Map.Entry<String, Long> e : m.entrySet()) {
      if (e.getValue() < min) {
        min = e.getValue();
        oldest = e.getKey();
      }
    }
    m.remove(oldest);
  }

  private void publishCold(String endpoint, long seq, int maxEndpoints, long now) {
    ColdChange c = new ColdChange(now + delayNanos, endpoint, seq, maxEndpoints);
    if (delayNanos <= 0) {
      applyCold(c);
    } else {
      applyDue(now);
      pendingCold.addLast(c);
    }
  }

  private void withdraw(Replica r) {
    for (Map.Entry<String, long[]> e : new ArrayList<>(r.published.entrySet())) {
      apply(r, e.getKey(), 0, 0);
    }
  }

  private static final class Spec {
    final long key;
    final String endpoint;
    final Replica replica;
    final long expiresAt;
    final long visibleAt;
    final int tailPos;
    final long tailKey;
    boolean dead;

    Spec(
        long key,
        String endpoint,
        Replica replica,
        long expiresAt,
        long visibleAt,
        int tailPos,
        long tailKey) {
      this.key = key;
      this.endpoint = endpoint;
      this.replica = replica;
      this.expiresAt = expiresAt;
      this.visibleAt = visibleAt;
      this.tailPos = tailPos;
      this.tailKey = tailKey;
    }
  }

  /**
   * One family of checkpoint entries (the speculative entries, or the routing memory): per key, the
   * entries written under it; in write order, for expiry and the bound. Guarded by the fleet's
   * lock.
   */
  private static final class Entries {
    final int max;
    final HashMap<Long, List<Spec>> byKey = new HashMap<>();
    final ArrayDeque<Spec> order = new ArrayDeque<>();
    final LongAdder evicted = new LongAdder();
    int live;

    Entries(int max) {
      this.max = max;
    }

    void expire(long now) {
      Spec s;
      while ((s = order.peekFirst()) != null && (s.dead || s.expiresAt - now <= 0)) {
        order.removeFirst();
        kill(s);
      }
    }

    void kill(Spec s) {
      if (s.dead) {
        return;
      }
      s.dead = true;
      live--;
      List<Spec> l = byKey.get(s.key);
      if (l != null) {
        l.remove(s);
        if (l.isEmpty()) {
          byKey.remove(s.key);
        }
      }
    }

    /** Writes a request's checkpoints (entries live {@code ttlNanos}, seen after {@code delay}). */
    void write(
        Replica r, String endpoint, long[] keys, int n, long now, long ttlNanos, long delay) {
      expire(now);
      int stride = r.config.speculativeStride();
      int perKey = r.config.maxEntriesPerKey();
      for (int c = 0, m = FleetCheckpoints.count(n, stride); c < m; c++) {
        int q = FleetCheckpoints.position(c, stride);
        int t = FleetCheckpoints.tail(q, n, stride);
        add(r, keys[q], endpoint, t, keys[t], now + ttlNanos, now + delay, perKey);
      }
    }

    private void add(
        Replica r,
        long key,
        String endpoint,
        int tailPos,
        long tailKey,
        long expiresAt,
        long visibleAt,
        int perKey) {
      List<Spec> l = byKey.computeIfAbsent(key, k -> new ArrayList<>(2));
      for (Iterator<Spec> it = l.iterator(); it.hasNext(); ) {
        Spec old = it.next();
        if (old.replica == r
            && old.tailPos == tailPos
            && old.tailKey == tailKey
            && old.endpoint.equals(endpoint)) {
          it.remove();
          old.dead = true;
          live--;
        }
      }
      while (l.size() >= perKey) {
        Spec old = l.remove(0);
        old.dead = true;
        live--;
      }
      Spec s = new Spec(key, endpoint, r, expiresAt, visibleAt, tailPos, tailKey);
      l.add(s);
      order.addLast(s);
      live++;
      if (order.size() > 2L * max + 1024) { // replaced entries pile up
        order.removeIf(x -> x.dead);
      }
      while (live > max) {
        Spec old = order.pollFirst();
        if (old == null) {
          break;
        }
        if (!old.dead) {
          kill(old);
          evicted.increment();
        }
      }
    }

    /** The blocks each candidate holds by these entries, as seen by {@code reader}. */
    void match(
        Replica reader,
        boolean ownOnly,
        List<String> endpoints,
        long[] keys,
        int n,
        int[] out,
        long now) {
      if (n <= 0 || byKey.isEmpty()) {
        return;
      }
      int stride = reader.config.speculativeStride();
      Map<String, Integer> pos = positions(endpoints);
      for (int c = 0, m = FleetCheckpoints.count(n, stride); c < m; c++) {
        int q = FleetCheckpoints.position(c, stride);
        List<Spec> l = byKey.get(keys[q]);
        if (l == null) {
          continue;
        }
        for (Spec s : l) {
          boolean visible = s.replica == reader || (!ownOnly && s.visibleAt - now <= 0);
          if (!visible || s.expiresAt - now <= 0) {
            continue;
          }
          Integer i = pos.get(s.endpoint);
          if (i != null) {
            out[i] = Math.max(out[i], FleetCheckpoints.held(keys, n, q, s.tailPos, s.tailKey));
          }
        }
      }
      for (int j = 0; j < endpoints.size(); j++) { // an endpoint listed twice: the same answer
        out[j] = out[pos.get(endpoints.get(j))];
      }
    }

    /** Drops {@code r}'s entries of an endpoint. */
    void remove(Replica r, String endpoint) {
      for (Spec s : order) {
        if (s.replica == r && !s.dead && s.endpoint.equals(endpoint)) {
          kill(s);
        }
      }
    }
  }

  private static Map<String, Integer> positions(List<String> endpoints) {
    Map<String, Integer> pos = new HashMap<>(endpoints.size() * 2);
    for (int i = endpoints.size() - 1; i >= 0; i--) {
      pos.put(endpoints.get(i), i);
    }
    return pos;
  }

  // ------------------------------------------------------------------ a replica

  /** One replica's handle. Thread-safe: its tables are guarded by the fleet's lock. */
  private final class Replica implements FleetState {
    final FleetConfig config;
    final Map<String, long[]> local = new HashMap<>(); // guarded by lock
    final Map<String, long[]> published = new HashMap<>(); // guarded by lock
    final Map<String, Long> ownCold = new HashMap<>(); // guarded by lock
    boolean expired; // guarded by lock
    volatile boolean closed;
    final LongAdder overflow = new LongAdder();
    final Counter fleetViews;
    final Counter localViews;

    Replica(FleetConfig config) {
      this.config = config;
      MeterRegistry reg = config.meterRegistry().orElse(null);
      if (reg != null) {
        fleetViews = Counter.builder("kvroute.fleet.views").tag("source", "fleet").register(reg);
        localViews = Counter.builder("kvroute.fleet.views").tag("source", "local").register(reg);
        FunctionCounter.builder("kvroute.fleet.endpoints.overflow", overflow, LongAdder::sum)
            .register(reg);
        FunctionCounter.builder("kvroute.fleet.speculative.evicted", spec.evicted, LongAdder::sum)
            .register(reg);
        FunctionCounter.builder("kvroute.fleet.memory.evicted", memory.evicted, LongAdder::sum)
            .register(reg);
      } else {
        fleetViews = null;
        localViews = null;
      }
    }

    private long now() {
      return clock.getAsLong();
    }

    @Override
    public String replicaId() {
      return config.replicaId();
    }

    @Override
    public FleetConfig config() {
      return config;
    }

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
      if (closed) {
        return;
      }
      synchronized (lock) {
        long[] c = local.get(endpointId);
        if (c == null) {
          if (dr < 0) {
            return;
          }
          if (local.size() >= config.maxEndpoints()) {
            local.entrySet().removeIf(e -> e.getValue()[0] == 0 && e.getValue()[1] == 0);
            if (local.size() >= config.maxEndpoints()) {
              overflow.increment();
              return;
            }
          }
          c = new long[2];
          local.put(endpointId, c);
        }
        c[0] = Math.max(0, c[0] + dr);
        c[1] = Math.max(0, c[1] + dt);
        long now = now();
        if (expired) { // the lease ran out: publish everything again
          expired = false;
          for (Map.Entry<String, long[]> e : local.entrySet()) {
            publish(this, e.getKey(), e.getValue()[0], e.getValue()[1], now);
          }
        } else {
          publish(this, endpointId, c[0], c[1], now);
        }
      }
    }

    @Override
    public void speculate(String endpointId, long[] requestKeys, int numKeys) {
      write(spec, config.speculativeTtl(), endpointId, requestKeys, numKeys);
    }

    @Override
    public void remember(String endpointId, long[] prefixHashes, int numHashes) {
      write(memory, config.memoryTtl(), endpointId, prefixHashes, numHashes);
    }

    @Override
    public void coldRouted(String endpointId) {
      Objects.requireNonNull(endpointId, "endpointId");
      if (closed) {
        return;
      }
      synchronized (lock) {
        long seq = ++coldSeq;
        ownCold.put(endpointId, seq);
        if (ownCold.size() > config.maxEndpoints()) {
          dropOldest(ownCold);
        }
        publishCold(endpointId, seq, config.maxEndpoints(), now());
      }
    }

    private void write(Entries e, Duration ttl, String endpointId, long[] keys, int n) {
      Objects.requireNonNull(endpointId, "endpointId");
      Objects.checkFromIndexSize(0, n, keys.length);
      if (closed || n == 0 || ttl.isZero()) {
        return;
      }
      synchronized (lock) {
        e.write(this, endpointId, keys, n, now(), ttl.toNanos(), delayNanos);
      }
    }

    @Override
    public FleetView view(List<String> endpointIds, long[] requestKeys, int numKeys) {
      return build(endpointIds, requestKeys, numKeys, NO_KEYS, 0, false);
    }

    @Override
    public FleetView view(
        List<String> endpointIds,
        long[] requestKeys,
        int numKeys,
        long[] prefixHashes,
        int numHashes) {
      return build(endpointIds, requestKeys, numKeys, prefixHashes, numHashes, false);
    }

    @Override
    public FleetView localView(List<String> endpointIds, long[] requestKeys, int numKeys) {
      return build(endpointIds, requestKeys, numKeys, NO_KEYS, 0, true);
    }

    @Override
    public FleetView localView(
        List<String> endpointIds,
        long[] requestKeys,
        int numKeys,
        long[] prefixHashes,
        int numHashes) {
      return build(endpointIds, requestKeys, numKeys, prefixHashes, numHashes, true);
    }

    private FleetView build(
        List<String> eps, long[] keys, int n, long[] hashes, int nh, boolean ownOnly) {
      Objects.requireNonNull(eps, "endpointIds");
      if (n > 0) {
        Objects.checkFromIndexSize(0, n, keys.length);
      }
      if (nh > 0) {
        Objects.checkFromIndexSize(0, nh, hashes.length);
      }
      int size = eps.size();
      long[] req = new long[size];
      long[] tok = new long[size];
      int[] sp = new int[size];
      int[] mem = new int[size];
      long[] lastCold = new long[size];
      synchronized (lock) {
        long now = now();
        if (!ownOnly) {
          applyDue(now);
        }
        for (int i = 0; i < size; i++) {
          String e = eps.get(i);
          long[] own = local.get(e);
          if (own != null) {
            req[i] = own[0];
            tok[i] = own[1];
          }
          Long oc = ownCold.get(e);
          Long fc = ownOnly ? null : cold.get(e);
          lastCold[i] = Math.max(oc == null ? 0 : oc, fc == null ? 0 : fc);
          if (!ownOnly) {
            long[] all = aggregate.get(e);
            long[] mine = published.get(e);
            if (all != null) {
              req[i] += all[0] - (mine == null ? 0 : mine[0]);
              tok[i] += all[1] - (mine == null ? 0 : mine[1]);
            }
          }
        }
        spec.expire(now);
        spec.match(this, ownOnly, eps, keys, n, sp, now);
        if (nh > 0) {
          memory.expire(now);
          memory.match(this, ownOnly, eps, hashes, nh, mem, now);
        }
      }
      if (ownOnly) {
        if (localViews != null) {
          localViews.increment();
        }
        return view(FleetView.Source.LOCAL, eps, req, tok, sp, mem, lastCold);
      }
      if (fleetViews != null) {
        fleetViews.increment();
      }
      return view(FleetView.Source.FLEET, eps, req, tok, sp, mem, lastCold);
    }

    private static FleetView view(
        FleetView.Source source,
        List<String> eps,
        long[] req,
        long[] tok,
        int[] sp,
        int[] mem,
        long[] lastCold) {
      return FleetView.builder(source, eps)
          .inFlight(req, tok)
          .speculativeBlocks(sp)
          .rememberedBlocks(mem)
          .lastColdRouted(lastCold)
          .build();
    }

    @Override
    public void removeEndpoint(String endpointId) {
      synchronized (lock) {
        if (local.remove(endpointId) != null && !expired) {
          publish(this, endpointId, 0, 0, now());
        }
        spec.remove(this, endpointId);
        memory.remove(this, endpointId);
        if (ownCold.remove(endpointId) != null) {
          publishCold(endpointId, 0, config.maxEndpoints(), now());
        }
      }
    }

    @Override
    public boolean flush(Duration timeout) {
      return true;
    }

    @Override
    public boolean available() {
      return true;
    }

    @Override
    public void close() {
      synchronized (lock) {
        if (closed) {
          return;
        }
        closed = true;
        withdraw(this);
        replicas.remove(config.replicaId(), this);
      }
    }

    @Override
    public String toString() {
      return "InMemoryFleet.Replica{" + config.replicaId() + "}";
    }
  }

  /** Builder of {@link InMemoryFleet}; not thread-safe. */
  public static final class Builder {
    private Duration visibilityDelay = Duration.ZERO;
    private LongSupplier nanoClock = System::nanoTime;
    private int maxSpeculativeEntries = 1_000_000;
    private int maxMemoryEntries = 1_000_000;

    private Builder() {}

    /** How long a replica's changes take to reach the others (default 0: at once). */
    public Builder visibilityDelay(Duration delay) {
      Objects.requireNonNull(delay, "visibilityDelay");
      if (delay.isNegative()) {
        throw new IllegalArgumentException("fleet.visibilityDelay must be >= 0, was " + delay);
      }
      this.visibilityDelay = delay;
      return this;
    }

    /** The fleet's monotonic clock in nanoseconds (default {@link System#nanoTime()}). */
    public Builder nanoClock(LongSupplier clock) {
      this.nanoClock = Objects.requireNonNull(clock, "nanoClock");
      return this;
    }

    /** Speculative entries held fleet-wide (default 1,000,000). */
    public Builder maxSpeculativeEntries(int max) {
      if (max < 1) {
        throw new IllegalArgumentException("fleet.maxSpeculativeEntries must be >= 1, was " + max);
      }
      this.maxSpeculativeEntries = max;
      return this;
    }

    /** Routing-memory entries held fleet-wide (default 1,000,000). */
    public Builder maxMemoryEntries(int max) {
      if (max < 1) {
        throw new IllegalArgumentException("fleet.maxMemoryEntries must be >= 1, was " + max);
      }
      this.maxMemoryEntries = max;
      return this;
    }

    /** Builds the (empty) fleet. */
    public InMemoryFleet build() {
      return new InMemoryFleet(this);
    }
  }
}
