package io.kvroute.router;

import io.kvroute.connector.Endpoint;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.hash.BlockExtraKeys;
import io.kvroute.kvindex.parity.HashSettings;
import io.kvroute.kvindex.parity.ParityCheck;
import io.kvroute.kvindex.parity.ParityDiagnosis;
import io.kvroute.kvindex.parity.ParityEvidence;
import io.kvroute.kvindex.zmq.KvEventListener;
import io.kvroute.scoring.Decision;
import io.kvroute.scoring.PrefixCacheLookup;
import io.kvroute.scoring.ReuseSplit;
import io.kvroute.scoring.SchedulingRequest;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The router's KV-cache parity check: proves, request by request, that the block hashes kvroute
 * predicts for a prompt are the ones the chosen engine publishes, and says so loudly when they are
 * not. A router whose tokenizer, chat template, block size or hash settings differ from the
 * engines' would otherwise route precisely on nothing, silently.
 *
 * <p><b>What it does.</b> For a sample of routed requests that carry token ids, it remembers the
 * engine that computes the prompt (the prefill endpoint of a disaggregated request) and how much of
 * the prompt the scheduler believed that engine held; from then on it keeps that engine's {@code
 * BlockStored} events (references, in a bounded ring per engine). After the engine answered (the
 * response's first byte, or {@link RouteDecision#complete} for a gateway that proxies itself) plus
 * a grace period for the events to arrive, it computes, off the request path, the vLLM block hashes
 * the engine should have published for the prompt's uncached blocks ({@link
 * ParityCheck#expectedHashes}: SHA-256 as configured, about 100 ns a block) and counts how many it
 * did. A sample whose engine published nothing in the meantime proves nothing and is not counted.
 * Per model it keeps the ratio of matched to predicted blocks over the last {@link
 * Builder#window(int)} samples, and per endpoint the same for the readiness detail; and it compares
 * each request's engine-reported {@code cached_tokens} with the prefix kvroute predicted.
 *
 * <p><b>When parity fails</b> (the model's ratio falls below {@link Builder#threshold(double)} over
 * at least {@link Builder#minSamples(int)} samples): one WARN naming the model and the likely cause
 * ({@link ParityCheck#diagnose} on the last sample that missed, with the engine's events: the
 * events' {@code block_size} differs; no stored hash matches under the configured algorithm or seed
 * but one does under another; the engine's token ids differ from kvroute's — chat template, special
 * tokens), the {@code kvroute.routing.parity.*} meters, a readiness detail ({@link #readiness()}),
 * and, unless {@link Builder#degrade(boolean)} is off, the model is routed with approximate scoring
 * (the precise index is not read for it) until parity returns: samples go on, so a fixed deployment
 * is noticed and the model is routed precisely again (INFO).
 *
 * <p><b>Wiring.</b> Give the monitor to the router ({@link KvRouter.Builder#parity}) and its {@link
 * #eventListener(KvEventListener)} to the KV-event subscriber that feeds the router's index, so it
 * sees the engines' events:
 *
 * <pre>{@code
 * ParityMonitor parity = ParityMonitor.builder(HashSettings.of(HashAlgorithm.SHA256, 16, null))
 *     .meterRegistry(registry).build();
 * KvEventFeed feed = KvEventFeeds.zmq(
 *     KvEventFeeds.subscriberFor(index).listener(parity.eventListener(KvEventListener.NONE)).build(),
 *     index);
 * KvRouter router = KvRouter.builder().eventFeed(feed).parity(parity)...build();
 * }</pre>
 *
 * <p><b>Cost and bounds.</b> On the request path a sampled request costs a few atomic operations
 * and a map lookup (a request of a degraded model one index lookup more); hashing and matching run
 * on the monitor's own thread. Samples are rate-limited ({@link Builder#samplesPerSecond(double)})
 * and at most {@link Builder#maxPending(int)} wait at once; an engine's events are kept only while
 * a sample waits on it, at most {@value #RING} per engine; at most {@link Builder#maxModels(int)}
 * models are tracked. Each bound that bites is counted ({@code kvroute.routing.parity.samples}).
 *
 * <p>Thread-safe. Closed by the router it was given to.
 */
public final class ParityMonitor implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(ParityMonitor.class);

  /** {@code BlockStored} events kept per engine while samples wait on it. */
  static final int RING = 4096;

  /** Endpoints tracked per model for the readiness detail. */
  private static final int MAX_ENDPOINTS_PER_MODEL = 256;

  /** Idle engine watches kept (an engine's watch is reused by its next sample). */
  private static final int MAX_IDLE_WATCHES = 1024;

  /** Root events kept per model for a diagnosis. */
  private static final int MAX_ROOTS = 16;

  /** Events kept per sample for a diagnosis. */
  private static final int EVIDENCE = 64;

  /** How often the monitor's thread resolves samples. */
  private static final long TICK_MILLIS = 20;

  private final HashSettings expected;
  private final ParityCheck check;
  private final double threshold;
  private final int minSamples;
  private final int window;
  private final long graceNanos;
  private final long maxWaitNanos;
  private final int maxPending;
  private final long permitNanos;
  private final long burstNanos;
  private final boolean degrade;
  private final int maxBlocks;
  private final int maxModels;
  private final Listener listener;
  private final LongSupplier nanoClock;
  private final MeterRegistry registry;

  private final ConcurrentHashMap<String, PodWatch> watches = new ConcurrentHashMap<>();
  private final ConcurrentLinkedQueue<Sample> incoming = new ConcurrentLinkedQueue<>();
  private final AtomicInteger pending = new AtomicInteger();
  private final AtomicLong nextPermit;
  private final ConcurrentHashMap<String, ModelState> models = new ConcurrentHashMap<>();
  private volatile Set<String> degradedModels = Set.of();
  private final AtomicBoolean closed = new AtomicBoolean();
  private final ScheduledExecutorService thread;
  // the monitor's thread only
  private final List<Sample> active = new ArrayList<>();

  private final Map<String, Counter> outcomes = new ConcurrentHashMap<>();
  private final Counter matchedBlocks;
  private final Counter missingBlocks;
  private final Timer checkTimer;

  private ParityMonitor(Builder b) {
    this.expected = b.expected;
    this.check = ParityCheck.of(b.expected);
    this.threshold = b.threshold;
    this.minSamples = b.minSamples;
    this.window = b.window;
    this.graceNanos = b.grace.toNanos();
    this.maxWaitNanos = b.maxWait.toNanos();
    this.maxPending = b.maxPending;
    this.permitNanos = (long) (1e9 / b.samplesPerSecond);
    this.burstNanos = Math.max(permitNanos, TimeUnit.SECONDS.toNanos(1));
    this.degrade = b.degrade;
    this.maxBlocks = b.maxBlocks;
    this.maxModels = b.maxModels;
    this.listener = b.listener;
    this.nanoClock = b.nanoClock;
    this.registry = b.meterRegistry;
    this.nextPermit = new AtomicLong(nanoClock.getAsLong() - burstNanos);
    this.matchedBlocks = blocks("matched");
    this.missingBlocks = blocks("missing");
    this.checkTimer =
        Timer.builder("kvroute.routing.parity.check.duration")
            .description("Time to hash and match one sample, on the parity monitor's thread")
            .register(registry);
    Gauge.builder("kvroute.routing.parity.pending", pending, AtomicInteger::get)
        .description("Samples waiting for their engine's KV events (bounded by maxPending)")
        .register(registry);
    this.thread =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "kvroute-parity");
              t.setDaemon(true);
              return t;
            });
    thread.scheduleWithFixedDelay(
        this::tickQuietly, TICK_MILLIS, TICK_MILLIS, TimeUnit.MILLISECONDS);
  }

  /**
   * A builder for engines that hash as {@code expected} (block size, {@code
   * --prefix-caching-hash-algo}, {@code PYTHONHASHSEED}).
   *
   * @throws IllegalArgumentException when {@code expected} is not {@link
   *     HashSettings#reproducible()} (no one can predict such an engine's hashes)
   */
  public static Builder builder(HashSettings expected) {
    return new Builder(expected);
  }

  /** The hashing the engines are expected to use. */
  public HashSettings expected() {
    return expected;
  }

  /**
   * Whether {@code model} is routed with approximate scoring because its parity failed (and
   * degrading is on). Reads one volatile set; cheap enough for every request.
   */
  public boolean degraded(String model) {
    Set<String> d = degradedModels;
    return !d.isEmpty() && d.contains(model);
  }

  /** The status of every model sampled so far (in no particular order). */
  public List<ParityStatus> models() {
    List<ParityStatus> out = new ArrayList<>();
    for (ModelState m : models.values()) {
      out.add(m.status());
    }
    return out;
  }

  /** The status of {@code model}, if it was sampled. */
  public Optional<ParityStatus> model(String model) {
    ModelState m = models.get(model);
    return m == null ? Optional.empty() : Optional.of(m.status());
  }

  /** True when some model's parity failed. */
  public boolean failing() {
    for (ModelState m : models.values()) {
      if (m.state == ParityStatus.State.FAILED) {
        return true;
      }
    }
    return false;
  }

  /**
   * The readiness detail: one line per model ({@link ParityStatus#describe()}), or {@code "parity:
   * no sample yet"}. A failed parity does not make a gateway unready (it still routes, degraded):
   * fronts add these lines to their readiness answer.
   */
  public List<String> readiness() {
    List<String> lines = new ArrayList<>();
    for (ParityStatus s : models()) {
      lines.add("parity: " + s.describe());
    }
    if (lines.isEmpty()) {
      lines.add("parity: no sample yet (" + expected.describe() + ")");
    }
    return lines;
  }

  /**
   * A KV-event listener that shows the monitor every applied batch, then passes every call to
   * {@code next}: give it to the subscriber that feeds the router's index. While no sample waits on
   * a pod, a batch costs one map lookup.
   */
  public KvEventListener eventListener(KvEventListener next) {
    Objects.requireNonNull(next, "next");
    return new EventTap(next);
  }

  /** Stops the monitor's thread; later samples are not taken. Idempotent. */
  @Override
  public void close() {
    if (closed.compareAndSet(false, true)) {
      thread.shutdownNow();
    }
  }

  @Override
  public String toString() {
    return "ParityMonitor{" + expected.describe() + ", threshold " + threshold + "}";
  }

  // ---------------------------------------------------------------- the request path

  /**
   * Takes a sample of a routed decision, when the rate and the bounds allow and the request has
   * token ids: the engine that computes the prompt is {@code computing}, and {@code lookup} (the
   * scheduler's precise index, or null) answers how much of the prompt it holds when the decision
   * itself was not scored precisely (a degraded model). Returns null when not sampled.
   */
  Sample sample(Decision d, Endpoint computing, PrefixCacheLookup lookup) {
    SchedulingRequest r = d.request();
    if (closed.get() || !r.hasTokenIds() || d.promptTokens() < expected.blockSize()) {
      return null;
    }
    String model = r.model();
    ModelState ms = models.get(model);
    if (ms == null && models.size() >= maxModels) {
      outcome("model_limit");
      return null;
    }
    if (pending.get() >= maxPending) {
      outcome("pending_full");
      return null;
    }
    long now = nanoClock.getAsLong();
    long next = nextPermit.get();
    if (next > now
        || !nextPermit.compareAndSet(next, Math.max(next, now - burstNanos) + permitNanos)) {
      outcome("rate_limited");
      return null;
    }
    long held;
    if (r.preciseScoring()) {
      held = ReuseSplit.of(d, computing).captured();
    } else if (lookup != null) {
      held = heldByIndex(r, computing, lookup);
    } else {
      return null;
    }
    if (ms == null) {
      ms = models.computeIfAbsent(model, ModelState::new);
    }
    PodWatch w = watches.computeIfAbsent(computing.id(), id -> new PodWatch());
    w.watchers.incrementAndGet();
    Sample s = new Sample(ms, computing, r, held, now, w, w.position(), w.resyncs());
    pending.incrementAndGet();
    incoming.add(s);
    return s;
  }

  /** The prompt's tokens {@code e} holds per the precise index (a degraded model's request). */
  private static long heldByIndex(SchedulingRequest r, Endpoint e, PrefixCacheLookup lookup) {
    int[] tokens = r.tokenIds().orElseThrow();
    long[] keys = lookup.requestKeys(tokens, r.lora().orElse(null), r.cacheSalt().orElse(null));
    int[] matched = new int[1];
    lookup.lookup(keys, List.of(e), matched, new double[1]);
    int bs = lookup.blockSizeTokens();
    return ReuseSplit.reusableTokens((long) matched[0] * bs, bs, tokens.length);
  }

  /**
   * A measured request of {@code model}: the engine's {@code cached_tokens} against the prefix
   * kvroute predicted (the split's {@code captured}).
   */
  void usage(String model, ReuseSplit measured) {
    ModelState ms = models.get(model);
    if (ms != null && measured.measured()) {
      ms.usageMeasured.incrementAndGet();
      if (measured.captured() == measured.delivered()) {
        ms.usageExact.incrementAndGet();
      }
    }
  }

  /** One sampled request, from its decision until its engine's events are judged. */
  static final class Sample {
    final ModelState model;
    final Endpoint computing;
    final SchedulingRequest request;
    final long heldTokens;
    final long registered;
    final PodWatch watch;
    final long resyncs;
    private volatile long answered = -1;
    private volatile long reportedCached = -1;
    private volatile boolean dropped;
    private volatile boolean judged;
    // the monitor's thread only: the predicted hashes, which of them were seen, and the events
    // read so far (the first EVIDENCE of them kept for a diagnosis)
    long[] predicted;
    Map<Long, Integer> index;
    java.util.BitSet found;
    int matched;
    long scanned;
    int stored;
    final List<KvEvent.BlockStored> evidence = new ArrayList<>();

    Sample(
        ModelState model,
        Endpoint computing,
        SchedulingRequest request,
        long heldTokens,
        long registered,
        PodWatch watch,
        long from,
        long resyncs) {
      this.model = model;
      this.computing = computing;
      this.request = request;
      this.heldTokens = heldTokens;
      this.registered = registered;
      this.watch = watch;
      this.scanned = from;
      this.resyncs = resyncs;
    }

    /**
     * The engine answered (the response's first byte, or the request's end): its prompt's blocks
     * are stored; the sample is judged once the grace period for their events has passed.
     */
    void answered(long nanos) {
      if (answered < 0) {
        answered = nanos;
      }
    }

    /** The engine reported {@code cachedTokens} of the prompt as cached. */
    void reported(long cachedTokens) {
      reportedCached = cachedTokens;
    }

    /** The request failed, was cancelled, or another engine served it: nothing to judge. */
    void drop() {
      dropped = true;
    }

    /** True once the monitor is done with the sample (judged, dropped or expired). */
    boolean judged() {
      return judged;
    }

    /** Drops the sample when {@code computing} is not the engine it watches. */
    void served(Endpoint computing) {
      if (!this.computing.equals(computing)) {
        dropped = true;
      }
    }
  }

  // ---------------------------------------------------------------- the events

  /** The {@code BlockStored} events of one engine, kept while samples wait on it. */
  static final class PodWatch {
    final AtomicInteger watchers = new AtomicInteger();
    private final KvEvent.BlockStored[] ring = new KvEvent.BlockStored[RING];
    private volatile long appended;
    private volatile long resyncs;

    synchronized void append(KvEvent.BlockStored e) {
      long n = appended;
      ring[(int) (n % RING)] = e;
      appended = n + 1;
    }

    long position() {
      return appended;
    }

    void resynced() {
      synchronized (this) {
        resyncs++;
      }
    }

    long resyncs() {
      return resyncs;
    }

    /** The events appended since {@code from}, or null when the ring no longer holds them all. */
    synchronized List<KvEvent.BlockStored> since(long from) {
      long n = appended;
      if (n - from > RING) {
        return null;
      }
      List<KvEvent.BlockStored> out = new ArrayList<>((int) (n - from));
      for (long i = from; i < n; i++) {
        out.add(ring[(int) (i % RING)]);
      }
      return out;
    }

    synchronized void clear() {
      java.util.Arrays.fill(ring, null);
    }
  }

  /** Shows the monitor the applied batches of watched pods; passes everything on. */
  private final class EventTap implements KvEventListener {
    private final KvEventListener next;

    EventTap(KvEventListener next) {
      this.next = next;
    }

    @Override
    public void onBatch(String pod, String topic, long seq, KvEventBatch batch, boolean replayed) {
      PodWatch w = watches.get(pod);
      if (w != null && w.watchers.get() > 0) {
        for (KvEvent e : batch.events()) {
          if (e instanceof KvEvent.BlockStored s) {
            w.append(s);
          }
        }
      }
      next.onBatch(pod, topic, seq, batch, replayed);
    }

    @Override
    public void onGap(String pod, long expected, long received) {
      next.onGap(pod, expected, received);
    }

    @Override
    public void onReplay(String pod, long from, long to, int replayed, boolean complete) {
      next.onReplay(pod, from, to, replayed, complete);
    }

    @Override
    public void onRestart(String pod, long last, long received) {
      resynced(pod);
      next.onRestart(pod, last, received);
    }

    @Override
    public void onResync(String pod, String reason) {
      resynced(pod);
      next.onResync(pod, reason);
    }

    @Override
    public void onDuplicate(String pod, long seq) {
      next.onDuplicate(pod, seq);
    }

    @Override
    public void onDropped(String pod, long seq, String reason, Exception cause) {
      next.onDropped(pod, seq, reason, cause);
    }

    private void resynced(String pod) {
      PodWatch w = watches.get(pod);
      if (w != null) {
        w.resynced();
      }
    }
  }

  // ---------------------------------------------------------------- the monitor's thread

  private void tickQuietly() {
    try {
      tick();
    } catch (RuntimeException e) {
      log.warn("kvroute: parity check failed: {}", e.toString(), e);
    }
  }

  /** Resolves the samples that are due. */
  void tick() {
    for (Sample s; (s = incoming.poll()) != null; ) {
      active.add(s);
    }
    long now = nanoClock.getAsLong();
    Iterator<Sample> it = active.iterator();
    while (it.hasNext()) {
      Sample s = it.next();
      String outcome = null;
      if (s.dropped) {
        outcome = "dropped";
      } else if (s.answered >= 0 && now - s.answered >= graceNanos) {
        outcome = judge(s, true);
      } else if (s.answered >= 0) {
        outcome = judge(s, false); // early: every predicted block already seen
      } else if (now - s.registered >= maxWaitNanos) {
        outcome = "expired";
      }
      if (outcome != null) {
        it.remove();
        s.judged = true;
        pending.decrementAndGet();
        outcome(outcome);
        if (s.watch.watchers.decrementAndGet() == 0) {
          s.watch.clear();
        }
      }
    }
    if (active.isEmpty() && watches.size() > MAX_IDLE_WATCHES) {
      watches.values().removeIf(w -> w.watchers.get() == 0);
    }
  }

  /**
   * Judges a sample: null while it should wait (not {@code due} and not every predicted block seen
   * yet), else its outcome.
   */
  private String judge(Sample s, boolean due) {
    long start = System.nanoTime();
    try {
      if (s.predicted == null) {
        s.predicted = predict(s);
        s.index = new java.util.HashMap<>(s.predicted.length * 2);
        for (int i = 0; i < s.predicted.length; i++) {
          s.index.putIfAbsent(s.predicted[i], i);
        }
        s.found = new java.util.BitSet(s.predicted.length);
      }
      if (s.predicted.length == 0) {
        return "nothing_new";
      }
      if (s.watch.resyncs() != s.resyncs) {
        return "resynced";
      }
      List<KvEvent.BlockStored> events = s.watch.since(s.scanned);
      if (events == null) {
        return "overflow";
      }
      s.scanned += events.size();
      for (KvEvent.BlockStored e : events) {
        s.stored++;
        if (s.evidence.size() < EVIDENCE) {
          s.evidence.add(e);
        }
        for (int i = 0; i < e.blockHashes().size(); i++) {
          Integer at = s.index.get(e.blockHashes().get(i));
          if (at != null && !s.found.get(at)) {
            s.found.set(at);
            s.matched++;
          }
        }
      }
      if (!due && s.matched < s.predicted.length) {
        return null;
      }
      if (s.stored == 0) {
        return "no_events";
      }
      record(s);
      return "checked";
    } finally {
      checkTimer.record(System.nanoTime() - start, TimeUnit.NANOSECONDS);
    }
  }

  /**
   * The event-form hashes of the prompt's blocks the engine should store: from the first block it
   * did not hold (what the scheduler believed, or what the engine reported if more) to the last
   * full block, at most {@code maxBlocks} blocks hashed in all.
   */
  private long[] predict(Sample s) {
    int[] tokens = s.request.tokenIds().orElseThrow();
    int bs = expected.blockSize();
    long held = Math.max(s.heldTokens, s.reportedCached);
    int first = (int) Math.min(Integer.MAX_VALUE, held / bs);
    int blocks = Math.min(tokens.length / bs, maxBlocks);
    if (first >= blocks) {
      return new long[0];
    }
    int[] prefix = java.util.Arrays.copyOf(tokens, blocks * bs);
    long[] all = check.expectedHashes(prefix, extras(s.request));
    return java.util.Arrays.copyOfRange(all, first, all.length);
  }

  private static BlockExtraKeys extras(SchedulingRequest r) {
    String lora = r.lora().orElse(null);
    String salt = r.cacheSalt().orElse(null);
    if (lora == null && salt == null) {
      return BlockExtraKeys.NONE;
    }
    return BlockExtraKeys.builder().loraName(lora).cacheSalt(salt).build();
  }

  private void record(Sample s) {
    matchedBlocks.increment(s.matched);
    missingBlocks.increment(s.predicted.length - s.matched);
    ModelState m = s.model;
    m.add(s.computing.id(), s.matched, s.predicted.length);
    if (s.matched < s.predicted.length) {
      m.lastMiss = s;
      m.keepRoots(s.evidence);
    }
    m.evaluate();
  }

  private void outcome(String outcome) {
    outcomes
        .computeIfAbsent(
            outcome,
            o ->
                Counter.builder("kvroute.routing.parity.samples")
                    .description("Parity samples by outcome")
                    .tag("outcome", o)
                    .register(registry))
        .increment();
  }

  private Counter blocks(String result) {
    return Counter.builder("kvroute.routing.parity.blocks")
        .description(
            "Predicted block hashes of checked samples, by whether the engine published them")
        .tag("result", result)
        .register(registry);
  }

  /** One model's samples, verdict and meters. */
  final class ModelState {
    final String model;
    private final long[] matched = new long[window];
    private final long[] predicted = new long[window];
    private int count;
    private int next;
    private long sumMatched;
    private long sumPredicted;
    private final Map<String, double[]> endpoints = new LinkedHashMap<>();
    volatile ParityStatus.State state = ParityStatus.State.UNKNOWN;
    private volatile ParityDiagnosis diagnosis;
    volatile Sample lastMiss;
    // root BlockStored events (with their own tokens) of recent samples that missed: they let a
    // diagnosis identify the engine's hashing even when the last miss stored only later blocks
    private final java.util.ArrayDeque<KvEvent.BlockStored> roots = new java.util.ArrayDeque<>();
    final AtomicLong usageMeasured = new AtomicLong();
    final AtomicLong usageExact = new AtomicLong();
    private final Map<ParityDiagnosis.Cause, Counter> failures = new ConcurrentHashMap<>();

    ModelState(String model) {
      this.model = model;
      Gauge.builder("kvroute.routing.parity.ratio", this, ModelState::ratio)
          .description("Predicted block hashes the engines published, over those predicted")
          .tag("model", model)
          .register(registry);
      Gauge.builder("kvroute.routing.parity.degraded", this, m -> degraded(m.model) ? 1 : 0)
          .description("1 while the model is routed with approximate scoring for lack of parity")
          .tag("model", model)
          .register(registry);
    }

    synchronized double ratio() {
      return sumPredicted == 0 ? Double.NaN : (double) sumMatched / sumPredicted;
    }

    synchronized void add(String endpoint, int m, int p) {
      if (count == window) {
        sumMatched -= matched[next];
        sumPredicted -= predicted[next];
      } else {
        count++;
      }
      matched[next] = m;
      predicted[next] = p;
      sumMatched += m;
      sumPredicted += p;
      next = (next + 1) % window;
      double[] e = endpoints.get(endpoint);
      if (e == null && endpoints.size() < MAX_ENDPOINTS_PER_MODEL) {
        e = new double[2];
        endpoints.put(endpoint, e);
      }
      if (e != null) {
        // an exponentially weighted tally: the last ~window samples of this endpoint
        double keep = 1.0 - 1.0 / window;
        e[0] = e[0] * keep + m;
        e[1] = e[1] * keep + p;
      }
    }

    synchronized void keepRoots(List<KvEvent.BlockStored> events) {
      for (KvEvent.BlockStored e : events) {
        if (!e.hasParent() && e.blockSize() > 0 && e.tokenIds().length > 0) {
          if (roots.size() == MAX_ROOTS) {
            roots.removeFirst();
          }
          roots.addLast(e);
        }
      }
    }

    synchronized List<KvEvent.BlockStored> roots() {
      return new ArrayList<>(roots);
    }

    private synchronized void reset() {
      count = 0;
      next = 0;
      sumMatched = 0;
      sumPredicted = 0;
    }

    /** After each checked sample, on the monitor's thread. */
    void evaluate() {
      int n;
      double r;
      synchronized (this) {
        n = count;
        r = ratio();
      }
      if (n < minSamples) {
        return;
      }
      if (r < threshold && state != ParityStatus.State.FAILED) {
        fail(r, n);
      } else if (r >= threshold && state != ParityStatus.State.OK) {
        boolean wasFailed = state == ParityStatus.State.FAILED;
        state = ParityStatus.State.OK;
        diagnosis = null;
        if (wasFailed) {
          setDegraded(false);
          log.info(
              "kvroute: KV-cache parity for model \"{}\" is back: {} of the predicted block"
                  + " hashes over {} sample(s) were published; routing it precisely again",
              model,
              String.format(java.util.Locale.ROOT, "%.2f", r),
              n);
          listen(() -> listener.restored(status()));
        }
      }
    }

    private void fail(double r, int n) {
      Sample miss = lastMiss;
      ParityDiagnosis d = miss == null ? null : diagnose(miss, roots());
      diagnosis = d;
      state = ParityStatus.State.FAILED;
      reset();
      if (degrade) {
        setDegraded(true);
      }
      ParityDiagnosis.Cause cause = d == null ? ParityDiagnosis.Cause.UNEXPLAINED : d.cause();
      failures
          .computeIfAbsent(
              cause,
              c ->
                  Counter.builder("kvroute.routing.parity.failures")
                      .description(
                          "Times a model's parity fell below the threshold, by likely cause")
                      .tag("model", model)
                      .tag("cause", c.name().toLowerCase(java.util.Locale.ROOT))
                      .register(registry))
          .increment();
      log.warn(
          "kvroute: KV-cache parity for model \"{}\" failed: only {} of the block hashes kvroute"
              + " predicted over {} sample(s) were published by the engines (threshold {}); likely"
              + " cause {}: {}; fix: {}; {}",
          model,
          String.format(java.util.Locale.ROOT, "%.2f", r),
          n,
          threshold,
          cause,
          d == null ? "no diagnosis" : d.message(),
          d == null ? "run kvroute doctor against an engine" : d.fix(),
          degrade
              ? "routing the model with approximate scoring until parity returns"
              : "still routing it precisely (parity.degrade is off)");
      listen(() -> listener.failed(status()));
    }

    ParityStatus status() {
      Map<String, Double> byEndpoint = new LinkedHashMap<>();
      double r;
      int n;
      synchronized (this) {
        endpoints.forEach((id, e) -> byEndpoint.put(id, e[1] == 0 ? Double.NaN : e[0] / e[1]));
        r = ratio();
        n = count;
      }
      return new ParityStatus(
          model,
          state,
          r,
          n,
          degraded(model),
          Optional.ofNullable(diagnosis),
          byEndpoint,
          usageMeasured.get(),
          usageExact.get());
    }

    private void setDegraded(boolean on) {
      synchronized (ParityMonitor.this) {
        Set<String> d = new HashSet<>(degradedModels);
        if (on) {
          d.add(model);
        } else {
          d.remove(model);
        }
        degradedModels = Set.copyOf(d);
      }
    }
  }

  private ParityDiagnosis diagnose(Sample s, List<KvEvent.BlockStored> roots) {
    ParityEvidence.Builder ev =
        ParityEvidence.builder()
            .promptTokens(s.request.tokenIds().orElseThrow())
            .extraKeys(extras(s.request));
    java.util.Set<KvEvent.BlockStored> events =
        java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
    events.addAll(roots);
    events.addAll(s.evidence);
    for (KvEvent.BlockStored e : events) {
      ev.storedEvent(e);
    }
    try {
      return check.diagnose(ev.build());
    } catch (RuntimeException e) {
      log.debug("kvroute: parity diagnosis failed", e);
      return null;
    }
  }

  private static void listen(Runnable r) {
    try {
      r.run();
    } catch (RuntimeException e) {
      log.warn("kvroute: parity listener failed: {}", e.toString());
    }
  }

  /** Told when a model's parity fails and when it returns. Methods must be fast and not throw. */
  public interface Listener {
    /** Does nothing. */
    Listener NONE = new Listener() {};

    /** {@code status.model()}'s parity fell below the threshold (logged at WARN as well). */
    default void failed(ParityStatus status) {}

    /** {@code status.model()}'s parity is back at or above the threshold. */
    default void restored(ParityStatus status) {}
  }

  /** Builds a {@link ParityMonitor}; not thread-safe. */
  public static final class Builder {
    private final HashSettings expected;
    private double threshold = 0.8;
    private int minSamples = 10;
    private int window = 64;
    private Duration grace = Duration.ofSeconds(1);
    private Duration maxWait = Duration.ofSeconds(60);
    private int maxPending = 1024;
    private double samplesPerSecond = 50;
    private boolean degrade = true;
    private int maxBlocks = 2048;
    private int maxModels = 64;
    private Listener listener = Listener.NONE;
    private LongSupplier nanoClock = System::nanoTime;
    private MeterRegistry meterRegistry = new SimpleMeterRegistry();

    private Builder(HashSettings expected) {
      this.expected = Objects.requireNonNull(expected, "expected");
      if (!expected.reproducible()) {
        throw new IllegalArgumentException(
            "parity: "
                + expected.describe()
                + " cannot be predicted (vLLM draws this NONE_HASH at random per process): set"
                + " the engines' PYTHONHASHSEED and configure the same seed");
      }
    }

    /**
     * The parity ratio below which a model's parity fails (default 0.8): matched over predicted
     * block hashes in the window. A right deployment measures 1.0 less what the index's lag costs;
     * a wrong one 0.
     */
    public Builder threshold(double threshold) {
      this.threshold = threshold;
      return this;
    }

    /** Checked samples a model needs before any verdict (default 10). */
    public Builder minSamples(int minSamples) {
      this.minSamples = minSamples;
      return this;
    }

    /** Checked samples the ratio covers, per model (default 64). */
    public Builder window(int window) {
      this.window = window;
      return this;
    }

    /**
     * How long after its engine answered a sample waits for that engine's KV events (default 1 s):
     * the events of a prefill are published at the end of its step, before the first token, and
     * reach kvroute within milliseconds on a healthy feed.
     */
    public Builder grace(Duration grace) {
      this.grace = Objects.requireNonNull(grace, "grace");
      return this;
    }

    /** The longest a sample waits for its engine's answer before it is dropped (default 60 s). */
    public Builder maxWait(Duration maxWait) {
      this.maxWait = Objects.requireNonNull(maxWait, "maxWait");
      return this;
    }

    /** Samples waiting at once, at most (default 1024); beyond, requests are not sampled. */
    public Builder maxPending(int maxPending) {
      this.maxPending = maxPending;
      return this;
    }

    /**
     * Samples taken per second, at most (default 50, with bursts of as many): every request of a
     * quiet gateway, a bounded share of a busy one. Each sample costs its prompt's blocks in
     * SHA-256 on the monitor's thread (about 100 ns a block, at most {@link #maxBlocks}).
     */
    public Builder samplesPerSecond(double samplesPerSecond) {
      this.samplesPerSecond = samplesPerSecond;
      return this;
    }

    /**
     * Route a model whose parity failed with approximate scoring until parity returns (default
     * true).
     */
    public Builder degrade(boolean degrade) {
      this.degrade = degrade;
      return this;
    }

    /** Blocks of a prompt hashed per sample, at most (default 2048). */
    public Builder maxBlocks(int maxBlocks) {
      this.maxBlocks = maxBlocks;
      return this;
    }

    /** Models tracked, at most (default 64); requests of further models are not sampled. */
    public Builder maxModels(int maxModels) {
      this.maxModels = maxModels;
      return this;
    }

    /** Told of failures and recoveries (default {@link Listener#NONE}). */
    public Builder listener(Listener listener) {
      this.listener = Objects.requireNonNull(listener, "listener");
      return this;
    }

    /** The monotonic clock of deadlines and the sampling rate (default {@link System#nanoTime}). */
    public Builder nanoClock(LongSupplier nanoClock) {
      this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
      return this;
    }

    /** Where the {@code kvroute.routing.parity.*} meters go. */
    public Builder meterRegistry(MeterRegistry registry) {
      this.meterRegistry = Objects.requireNonNull(registry, "meterRegistry");
      return this;
    }

    /**
     * Builds and starts the monitor (its thread, {@code kvroute-parity}).
     *
     * @throws IllegalArgumentException naming the first invalid option
     */
    public ParityMonitor build() {
      if (!(threshold > 0 && threshold <= 1)) {
        throw new IllegalArgumentException("parity.threshold must be in (0, 1], was " + threshold);
      }
      if (window < 1) {
        throw new IllegalArgumentException("parity.window must be >= 1, was " + window);
      }
      if (minSamples < 1 || minSamples > window) {
        throw new IllegalArgumentException(
            "parity.minSamples must be in [1, window=" + window + "], was " + minSamples);
      }
      if (grace.isNegative()) {
        throw new IllegalArgumentException("parity.grace must be >= 0, was " + grace);
      }
      if (maxWait.isNegative() || maxWait.isZero()) {
        throw new IllegalArgumentException("parity.maxWait must be > 0, was " + maxWait);
      }
      if (maxPending < 1) {
        throw new IllegalArgumentException("parity.maxPending must be >= 1, was " + maxPending);
      }
      if (!(samplesPerSecond > 0)) {
        throw new IllegalArgumentException(
            "parity.samplesPerSecond must be > 0, was " + samplesPerSecond);
      }
      if (maxBlocks < 1) {
        throw new IllegalArgumentException("parity.maxBlocks must be >= 1, was " + maxBlocks);
      }
      if (maxModels < 1) {
        throw new IllegalArgumentException("parity.maxModels must be >= 1, was " + maxModels);
      }
      return new ParityMonitor(this);
    }
  }
}
