package io.kvroute.replay.internal;

import io.kvroute.connector.Endpoint;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventCodec;
import io.kvroute.kvindex.fleet.FleetConfig;
import io.kvroute.kvindex.fleet.InMemoryFleet;
import io.kvroute.kvindex.hash.BlockHash;
import io.kvroute.kvindex.hash.VllmBlockHasher;
import io.kvroute.replay.ReplayListener;
import io.kvroute.replay.Slo;
import io.kvroute.replay.Strategy;
import io.kvroute.replay.StrategyResult;
import io.kvroute.router.flow.FlowControlConfig;
import io.kvroute.router.flow.FlowController;
import io.kvroute.router.flow.RequestDroppedException;
import io.kvroute.router.flow.SaturationDetector;
import io.kvroute.router.flow.SloGate;
import io.kvroute.scoring.BlockIndexLookup;
import io.kvroute.scoring.Decision;
import io.kvroute.scoring.EndpointMetrics;
import io.kvroute.scoring.Filters;
import io.kvroute.scoring.LatencyPredictor;
import io.kvroute.scoring.LatencySlo;
import io.kvroute.scoring.MetricsStore;
import io.kvroute.scoring.Pickers;
import io.kvroute.scoring.Profile;
import io.kvroute.scoring.ReuseSplit;
import io.kvroute.scoring.Scheduler;
import io.kvroute.scoring.SchedulingRequest;
import io.kvroute.scoring.Scorers;
import io.kvroute.testkit.engine.EngineListener;
import io.kvroute.testkit.engine.EngineModel;
import io.kvroute.testkit.engine.EngineProfile;
import io.kvroute.testkit.engine.EngineRequest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

/**
 * One strategy's replay: a discrete-event simulation of a fleet of {@link EngineModel}s in virtual
 * time, each request routed by a real {@link Scheduler} (the strategy's profiles), the precise
 * strategy's {@link BlockIndex} fed by the engines' per-step KV events encoded and decoded with the
 * real codec after a publication lag, engine metrics pushed to the scheduler's store at a scrape
 * interval.
 *
 * <p>Events at equal times run in the order they were queued, so a run is a pure function of its
 * inputs and seed. Not thread-safe: one thread runs it, once.
 */
public final class Simulation {
  /** The model name requests carry (the index's and the approximate hash's root). */
  static final String MODEL = "replay-model";

  private static final int ARRIVAL = 0;
  private static final int STEP_END = 1;
  private static final int DELIVER = 2;
  private static final int SCRAPE = 3;
  private static final int PREFILL_DONE = 4;
  private static final int KV_READY = 5;
  private static final int POLL = 6;
  private static final int RELEASE = 7;
  private static final int TIMELINE_BUCKETS = 60;
  private static final int CDF_POINTS = 200;

  /**
   * What every strategy's run shares.
   *
   * @param profile the engines' profile
   * @param pods aggregated engines (0 with prefill/decode)
   * @param prefill prefill engines (PD)
   * @param decode decode engines (PD)
   * @param speed arrival-time compression
   * @param slo the objective
   * @param seed randomness of the scheduler
   * @param eventLagNanos KV-event publication lag
   * @param scrapeIntervalNanos engine metrics refresh
   * @param kvBytesPerSecond KV transfer bandwidth between prefill and decode engines
   * @param flowControl admission in front of the scheduler, or null for none
   * @param replicas gateway replicas, each a scheduler of its own
   * @param sharing whether the replicas share in-flight counts, speculative entries and routing
   *     memory
   * @param hashAssignment requests go to replicas by a hash of their index (else round robin)
   * @param fleetStalenessNanos delay before one replica's changes reach the others
   * @param fleetMemoryTtlNanos how long the shared routing memory keeps an entry (0: not shared)
   * @param latencyWeight the predicted-latency scorer's weight (precise-latency)
   * @param latencyObjective whether that scorer is given the request's objective
   */
  public record Settings(
      EngineProfile profile,
      int pods,
      int prefill,
      int decode,
      double speed,
      Slo slo,
      long seed,
      long eventLagNanos,
      long scrapeIntervalNanos,
      double kvBytesPerSecond,
      FlowControlConfig flowControl,
      int replicas,
      boolean sharing,
      boolean hashAssignment,
      long fleetStalenessNanos,
      long fleetMemoryTtlNanos,
      double latencyWeight,
      boolean latencyObjective) {
    /** Engines in all. */
    public int engines() {
      return pods + prefill + decode;
    }

    /** Whether prefill and decode run on separate engines. */
    public boolean disaggregated() {
      return pods == 0;
    }
  }

  /** A queued event. */
  private static final class Ev implements Comparable<Ev> {
    final long time;
    final long seq;
    final int type;
    final int engine;
    final Object payload;

    Ev(long time, long seq, int type, int engine, Object payload) {
      this.time = time;
      this.seq = seq;
      this.type = type;
      this.engine = engine;
      this.payload = payload;
    }

    @Override
    public int compareTo(Ev o) {
      int c = Long.compare(time, o.time);
      return c != 0 ? c : Long.compare(seq, o.seq);
    }
  }

  /** One request in flight. */
  private static final class Flight {
    final int index;
    final long arrival;
    final int promptLen;
    final int outputLen;
    Scheduler scheduler;
    Decision decision;
    Endpoint decodeEp;
    Endpoint prefillEp;
    int decodeEngine;
    int prefillEngine = -1;
    EngineRequest prefillLeg;
    int[] tokens;
    List<BlockHash> hashes;
    long available;
    long captured;
    long delivered = -1;
    long firstToken = -1;
    long dispatched;
    boolean started;
    TraceRecord.Tag tag;
    int cls = -1;
    int tenant;
    Slo slo;
    FlowController.Admission admission;
    LatencyPredictor.Ticket ticket;

    Flight(int index, long arrival, int promptLen, int outputLen) {
      this.index = index;
      this.arrival = arrival;
      this.promptLen = promptLen;
      this.outputLen = outputLen;
    }
  }

  private final Settings settings;
  private final Strategy strategy;
  private final List<TraceRecord> records;
  private final ReplayListener listener;
  private final PriorityQueue<Ev> queue = new PriorityQueue<>();
  private final EngineModel[] engines;
  private final Endpoint[] endpoints;
  private final List<Endpoint> candidates;
  private final int[] computeEngines; // engines where prompts are computed (reuse accounting)
  private final Map<String, Integer> engineIndex = new LinkedHashMap<>();
  private final VllmBlockHasher hasher;
  private final Scheduler[] schedulers;
  private final InMemoryFleet fleet;
  private final MetricsStore metrics;
  private final BlockIndex index;
  private final OracleLookup oracle;
  private final double firstArrivalMillis;
  private final double spanMillis;
  private final LatencyPredictor predictor;
  private final FlowController flow;
  private final List<String> classNames = new ArrayList<>();
  private final List<String> tenantNames = new ArrayList<>();
  private final int[] classOf;
  private final int[] tenantOf;
  private long seq;
  private long now;

  // results
  private int nextArrival;
  private int done;
  private int rejected;
  private final float[] ttft;
  private final float[] tpot;
  private int ttftCount;
  private int tpotCount;
  private int met;
  private long promptTokens;
  private long outputTokens;
  private ReuseSplit reuse = ReuseSplit.ZERO;
  private long delivered;
  private long lastFinish;
  private final long[] bucketPrompt = new long[TIMELINE_BUCKETS];
  private final long[] bucketDelivered = new long[TIMELINE_BUCKETS];
  private final Map<String, Integer> dropped = new LinkedHashMap<>();
  private final float[] ttftError;
  private int ttftErrorCount;
  private final int[] backlog; // per tenant: arrived, not yet scheduled by an engine
  private int backloggedTenants;
  private final double[] servedWhileBacklogged;
  private final ClassStats[] classStats;

  /** One class's tallies. */
  private static final class ClassStats {
    int offered;
    int done;
    int met;
    long outputTokens;
    float[] ttft = new float[16];
    final Map<String, Integer> dropped = new LinkedHashMap<>();

    void ttft(float v) {
      if (done == ttft.length) {
        ttft = Arrays.copyOf(ttft, done * 2);
      }
      ttft[done++] = v;
    }
  }

  /** Builds the fleet, the index and the strategy's scheduler. */
  public Simulation(
      Settings settings, Strategy strategy, List<TraceRecord> records, ReplayListener listener) {
    this.settings = settings;
    this.strategy = strategy;
    this.records = records;
    this.listener = listener;
    this.firstArrivalMillis = records.get(0).arrivalMillis();
    this.spanMillis = records.get(records.size() - 1).arrivalMillis() - firstArrivalMillis;
    this.ttft = new float[records.size()];
    this.tpot = new float[records.size()];
    this.ttftError = new float[records.size()];
    this.classOf = new int[records.size()];
    this.tenantOf = new int[records.size()];
    Map<String, Integer> cls = new LinkedHashMap<>();
    Map<String, Integer> ten = new LinkedHashMap<>();
    for (int i = 0; i < records.size(); i++) {
      TraceRecord.Tag t = records.get(i).tag();
      classOf[i] = t.className() == null ? -1 : cls.computeIfAbsent(t.className(), k -> cls.size());
      tenantOf[i] = ten.computeIfAbsent(t.tenant(), k -> ten.size());
    }
    classNames.addAll(cls.keySet());
    tenantNames.addAll(ten.keySet());
    this.classStats = new ClassStats[classNames.size()];
    for (int k = 0; k < classStats.length; k++) {
      classStats[k] = new ClassStats();
    }
    this.backlog = new int[tenantNames.size()];
    this.servedWhileBacklogged = new double[tenantNames.size()];
    int n = settings.engines();
    this.engines = new EngineModel[n];
    this.endpoints = new Endpoint[n];
    boolean precise = strategy == Strategy.PRECISE || strategy == Strategy.PRECISE_LATENCY;
    // The index sized to the fleet, as a deployment would size it: 4x the blocks the engines can
    // hold, for request keys and for engine keys (whose mappings outlive removals until evicted).
    int indexKeys =
        (int) Math.min(1 << 29, Math.max(1 << 20, 4L * n * settings.profile().kvBlocks()));
    this.index =
        precise
            ? BlockIndex.inMemory(
                IndexConfig.builder()
                    .blockSize(settings.profile().blockSize())
                    .modelName(MODEL)
                    .maxKeys(indexKeys)
                    .maxEngineKeys(indexKeys)
                    .build())
            : null;
    EngineListener el = new Listener();
    List<Integer> compute = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      Endpoint.Role role;
      String id;
      if (settings.disaggregated()) {
        boolean pre = i < settings.prefill();
        role = pre ? Endpoint.Role.PREFILL : Endpoint.Role.DECODE;
        id = pre ? "prefill-" + i : "decode-" + (i - settings.prefill());
        if (pre) {
          compute.add(i);
        }
      } else {
        role = Endpoint.Role.BOTH;
        id = "engine-" + i;
        compute.add(i);
      }
      int engine = i;
      EngineModel.Builder b = EngineModel.builder(settings.profile()).name(id).listener(el);
      if (precise) {
        b.eventSink(events -> publish(engine, events));
      }
      engines[i] = b.build();
      endpoints[i] =
          Endpoint.builder(id, "10.0." + (i / 250) + "." + (i % 250 + 1), 8000).role(role).build();
      engineIndex.put(id, i);
    }
    this.computeEngines = compute.stream().mapToInt(Integer::intValue).toArray();
    this.candidates = List.of(endpoints);
    this.hasher = engines[0].hasher();
    Map<String, EngineModel> byId = new LinkedHashMap<>();
    for (int i = 0; i < n; i++) {
      byId.put(endpoints[i].id(), engines[i]);
    }
    this.oracle =
        strategy == Strategy.ORACLE ? new OracleLookup(byId, settings.profile().blockSize()) : null;
    // One metrics store: every replica scrapes the same engines at the same instants.
    this.metrics = MetricsStore.create(Duration.ofSeconds(2), () -> now, 100_000);
    int r = settings.replicas();
    this.fleet =
        r > 1 && settings.sharing()
            ? InMemoryFleet.builder()
                .nanoClock(() -> now)
                .visibilityDelay(Duration.ofNanos(settings.fleetStalenessNanos()))
                .build()
            : null;
    this.schedulers = new Scheduler[r];
    for (int k = 0; k < r; k++) {
      schedulers[k] = scheduler(k);
    }
    // flow control (one replica only) reads the first replica's predictor, which hears its requests
    this.predictor = schedulers[0].latencyPredictor();
    FlowControlConfig fc = settings.flowControl();
    if (fc != null && r > 1) {
      throw new IllegalArgumentException(
          "flow control in front of several gateway replicas is not modelled: use it with one"
              + " replica");
    }
    this.flow =
        fc == null
            ? null
            : FlowController.create(
                fc,
                SaturationDetector.of(
                    fc.saturation(), model -> candidates, metrics, predictor::prefillQueueTokens),
                () -> now,
                at -> push(Math.max(at, now), POLL, -1, null),
                null);
  }

  private Scheduler scheduler(int replica) {
    boolean pd = settings.disaggregated();
    Scheduler.Builder b =
        Scheduler.builder()
            .nanoClock(() -> now)
            .random(new SplittableRandom(settings.seed() + 0x9E3779B97F4A7C15L * replica))
            .metricsStore(metrics);
    if (fleet != null) {
      b.fleet(
          fleet.join(
              FleetConfig.builder()
                  .replicaId("replica-" + replica)
                  .nanoClock(() -> now)
                  .memoryTtl(Duration.ofNanos(settings.fleetMemoryTtlNanos()))
                  .build()));
    }
    switch (strategy) {
      case RANDOM:
        return custom(b, pd, p -> p.picker(Pickers.random("random-picker", 1)));
      case ROUND_ROBIN:
        {
          RoundRobinPicker decode = new RoundRobinPicker();
          RoundRobinPicker prefill = new RoundRobinPicker();
          b.profile(
              Profile.builder(Scheduler.DECODE_PROFILE)
                  .filter(Filters.decode())
                  .picker(decode)
                  .build());
          if (pd) {
            b.profile(
                Profile.builder(Scheduler.PREFILL_PROFILE)
                    .filter(Filters.prefill())
                    .picker(prefill)
                    .build());
          }
          return pdSettings(b, pd).approximateIndexing(false).build();
        }
      case LEAST_LOAD:
        return custom(
            b,
            pd,
            p ->
                p.scorer(Scorers.queue(), 1)
                    .scorer(Scorers.kvCacheUtilization(), 1)
                    .scorer(Scorers.activeRequests(), 1)
                    .picker(Pickers.maxScore()));
      case APPROXIMATE:
        return b.pdEnabled(pd).build();
      case PRECISE:
        return b.pdEnabled(pd).prefixCacheLookup(BlockIndexLookup.of(index)).build();
      case PRECISE_LATENCY:
        for (Profile p : Scheduler.defaultProfiles(true)) {
          b.profile(withPredictedLatency(p, settings.latencyWeight()));
        }
        return b.pdEnabled(pd).prefixCacheLookup(BlockIndexLookup.of(index)).build();
      default:
        return b.pdEnabled(pd).prefixCacheLookup(oracle).speculative(Duration.ZERO, 1).build();
    }
  }

  /** {@code p} with the predicted-latency scorer added at {@code weight}. */
  private static Profile withPredictedLatency(Profile p, double weight) {
    Profile.Builder out = Profile.builder(p.name());
    p.filters().forEach(out::filter);
    p.scorers().forEach(s -> out.scorer(s.scorer(), s.weight()));
    return out.scorer(Scorers.predictedLatency(), weight).picker(p.picker()).build();
  }

  private static Scheduler custom(
      Scheduler.Builder b, boolean pd, java.util.function.UnaryOperator<Profile.Builder> body) {
    b.profile(
        body.apply(Profile.builder(Scheduler.DECODE_PROFILE).filter(Filters.decode())).build());
    if (pd) {
      b.profile(
          body.apply(Profile.builder(Scheduler.PREFILL_PROFILE).filter(Filters.prefill())).build());
    }
    return pdSettings(b, pd).approximateIndexing(false).build();
  }

  private static Scheduler.Builder pdSettings(Scheduler.Builder b, boolean pd) {
    return pd ? b.pdEnabled(true).prefillProfile(Scheduler.PREFILL_PROFILE) : b;
  }

  // ---------------------------------------------------------------- the event loop

  private void push(long time, int type, int engine, Object payload) {
    queue.add(new Ev(time, seq++, type, engine, payload));
  }

  private long arrivalNanos(int i) {
    return Math.round(
        (records.get(i).arrivalMillis() - firstArrivalMillis) * 1e6 / settings.speed());
  }

  /** Runs the workload through the fleet and summarises it. */
  public StrategyResult run() {
    long wallStart = System.nanoTime();
    listener.onStrategyStart(strategy, records.size());
    push(0, SCRAPE, -1, null);
    push(arrivalNanos(0), ARRIVAL, -1, null);
    nextArrival = 1;
    while (!queue.isEmpty()) {
      Ev e = queue.poll();
      now = e.time;
      switch (e.type) {
        case ARRIVAL:
          arrive(nextArrival - 1);
          if (nextArrival < records.size()) {
            push(arrivalNanos(nextArrival), ARRIVAL, -1, null);
            nextArrival++;
          }
          break;
        case STEP_END:
          engines[e.engine].finishStep(now);
          tryStart(e.engine);
          break;
        case DELIVER:
          index.accept(endpoints[e.engine].id(), KvEventCodec.decode((byte[]) e.payload));
          break;
        case SCRAPE:
          scrape();
          if (flow != null) {
            flow.poll();
          }
          if (done + rejected + droppedCount() < records.size()) {
            push(now + settings.scrapeIntervalNanos(), SCRAPE, -1, null);
          }
          break;
        case PREFILL_DONE:
          prefillDone((Flight) e.payload);
          break;
        case POLL:
          flow.poll();
          break;
        case RELEASE:
          Flight ended = (Flight) e.payload;
          ended.admission.release(ended.outputLen);
          break;
        default: // KV_READY: the decode engine may start the leg; the prefill engine frees its KV
          Flight f = (Flight) e.payload;
          engines[f.prefillEngine].release(f.prefillLeg);
          tryStart(e.engine);
      }
    }
    listener.onProgress(strategy, done, records.size());
    StrategyResult r = summarise((System.nanoTime() - wallStart) / 1e9);
    listener.onStrategyEnd(r);
    return r;
  }

  private void scrape() {
    for (int i = 0; i < engines.length; i++) {
      EngineModel e = engines[i];
      metrics.update(
          endpoints[i].id(),
          EndpointMetrics.of(e.waitingRequests(), e.runningRequests(), e.kvCacheUsage()));
    }
  }

  private void tryStart(int i) {
    EngineModel e = engines[i];
    if (!e.busy()) {
      long end = e.startStep(now);
      if (end >= 0) {
        push(end, STEP_END, i, null);
      }
    }
  }

  private void publish(int engine, List<KvEvent> events) {
    byte[] payload = KvEventCodec.encode(KvEventBatch.of(now / 1e9, events));
    push(now + settings.eventLagNanos(), DELIVER, engine, payload);
  }

  private void arrive(int i) {
    TraceRecord rec = records.get(i);
    Flight f = new Flight(i, now, rec.inputLength(), rec.outputLength());
    f.tag = rec.tag();
    f.cls = classOf[i];
    f.tenant = tenantOf[i];
    f.slo = f.tag.slo() != null ? f.tag.slo() : settings.slo();
    if (f.cls >= 0) {
      classStats[f.cls].offered++;
    }
    f.tokens = Tokens.prompt(rec, i);
    f.hashes = hasher.hashBlocks(f.tokens);
    if (backlog[f.tenant]++ == 0) {
      backloggedTenants++;
    }
    if (flow == null) {
      route(f);
      return;
    }
    FlowController.FlowRequest fr =
        new FlowController.FlowRequest(
            MODEL,
            f.tag.priority(),
            f.tag.tenant(),
            (long) f.promptLen + f.outputLen,
            LatencySlo.of(f.slo.ttft(), f.slo.tpot()));
    await(f, flow.enqueue(fr));
  }

  /**
   * Routes {@code f} when admitted (flow control completes the future on this thread, in the event
   * that admitted it: an arrival, a poll or a release, never inside an engine's step), or counts it
   * if dropped.
   */
  private void await(Flight f, CompletableFuture<FlowController.Admission> admission) {
    admission.whenComplete(
        (a, t) -> {
          if (t != null) {
            Throwable c =
                t instanceof CompletionException && t.getCause() != null ? t.getCause() : t;
            String reason =
                c instanceof RequestDroppedException
                    ? ((RequestDroppedException) c).reason().header()
                    : c.getClass().getSimpleName();
            drop(f, reason);
            return;
          }
          f.admission = a;
          route(f);
        });
  }

  private void drop(Flight f, String reason) {
    dropped.merge(reason, 1, Integer::sum);
    if (f.cls >= 0) {
      classStats[f.cls].dropped.merge(reason, 1, Integer::sum);
    }
    unbacklog(f);
    f.tokens = null;
    f.hashes = null;
  }

  private int droppedCount() {
    int n = 0;
    for (int v : dropped.values()) {
      n += v;
    }
    return n;
  }

  private void unbacklog(Flight f) {
    if (--backlog[f.tenant] == 0) {
      backloggedTenants--;
    }
  }

  private void route(Flight f) {
    if (oracle != null) {
      oracle.current(f.hashes);
    }
    LatencySlo slo = LatencySlo.of(f.slo.ttft(), f.slo.tpot());
    SchedulingRequest sr =
        SchedulingRequest.builder()
            .model(MODEL)
            .tokenIds(f.tokens)
            .candidates(candidates)
            .slo(settings.latencyObjective() ? slo : LatencySlo.NONE)
            .build();
    Scheduler scheduler = schedulers[replicaOf(f.index)];
    Decision d = scheduler.pick(sr);
    if (!d.routed()) {
      rejected++;
      unbacklog(f);
      if (f.admission != null) {
        f.admission.release();
      }
      return;
    }
    if (f.admission != null && flow.config().sloAdmission()) {
      SloGate.Verdict v = SloGate.check(d, predictor, slo, now - f.admission.arrivalNanos());
      if (v == SloGate.Verdict.UNATTAINABLE) {
        RequestDroppedException x =
            f.admission.drop(RequestDroppedException.Reason.SLO_UNATTAINABLE, "slo-unattainable");
        drop(f, x.reason().header());
        return;
      }
      if (v == SloGate.Verdict.WAIT) {
        FlowController.Admission a = f.admission;
        f.admission = null;
        await(f, a.requeue());
        return;
      }
    }
    f.scheduler = scheduler;
    f.decision = d;
    f.decodeEp = d.primary().orElseThrow();
    f.prefillEp = d.prefill().orElse(null);
    f.decodeEngine = engineIndex.get(f.decodeEp.id());
    scheduler.onRouted(d, f.decodeEp, f.prefillEp);
    int computeOn = f.decodeEngine;
    if (f.prefillEp != null) {
      f.prefillEngine = engineIndex.get(f.prefillEp.id());
      computeOn = f.prefillEngine;
    }
    // reuse: what the eligible engines and the chosen one hold now (true state)
    long best = 0;
    int[] eligible =
        f.prefillEp != null || !settings.disaggregated() ? computeEngines : decodeEngines();
    for (int e : eligible) {
      best = Math.max(best, engines[e].cachedPrefixTokens(f.hashes, f.promptLen));
    }
    f.available = best;
    f.captured = engines[computeOn].cachedPrefixTokens(f.hashes, f.promptLen);
    Endpoint computeEp = f.prefillEp != null ? f.prefillEp : f.decodeEp;
    long cachedAtRouting = Math.min(f.promptLen, d.prefixMatch(computeEp).cachedTokens());
    f.dispatched = now;
    f.ticket = // each replica's predictor learns from what it routed, as in a deployment
        scheduler
            .latencyPredictor()
            .dispatched(
                computeEp.id(),
                f.decodeEp.id(),
                f.promptLen - cachedAtRouting,
                cachedAtRouting,
                now);
    if (f.prefillEp != null) {
      f.prefillLeg =
          EngineRequest.builder(f.index, f.tokens, 1)
              .blockHashes(f.hashes)
              .holdKv(true)
              .attachment(f)
              .build();
      engines[f.prefillEngine].submit(f.prefillLeg, now);
      tryStart(f.prefillEngine);
    } else {
      EngineRequest r =
          EngineRequest.builder(f.index, f.tokens, f.outputLen)
              .blockHashes(f.hashes)
              .attachment(f)
              .build();
      f.tokens = null;
      engines[f.decodeEngine].submit(r, now);
      tryStart(f.decodeEngine);
    }
  }

  /** The replica that routes request {@code i}. */
  private int replicaOf(int i) {
    int r = schedulers.length;
    if (r == 1) {
      return 0;
    }
    if (!settings.hashAssignment()) {
      return i % r;
    }
    long z = (i + 1) * 0x9E3779B97F4A7C15L; // SplitMix64's finaliser
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return (int) Long.remainderUnsigned(z ^ (z >>> 31), r);
  }

  private int[] decodeEngines() {
    int[] out = new int[settings.decode()];
    for (int k = 0; k < out.length; k++) {
      out[k] = settings.prefill() + k;
    }
    return out;
  }

  private void prefillDone(Flight f) {
    double bytes = (double) (f.promptLen - 1) * settings.profile().kvBytesPerToken();
    long ready = now + Math.round(bytes / settings.kvBytesPerSecond() * 1e9);
    EngineRequest r =
        EngineRequest.builder(f.index, f.tokens, f.outputLen)
            .blockHashes(f.hashes)
            .remoteKvReadyAt(ready)
            .attachment(f)
            .build();
    f.tokens = null;
    engines[f.decodeEngine].submit(r, now);
    tryStart(f.decodeEngine);
    push(ready, KV_READY, f.decodeEngine, f);
  }

  /** The engines' reports, on the simulation's thread. */
  private final class Listener implements EngineListener {
    @Override
    public void onScheduled(EngineRequest r, long nanos, int cachedTokens) {
      Flight f = (Flight) r.attachment();
      if (f.prefillLeg == null || r == f.prefillLeg) {
        f.delivered = cachedTokens;
        if (!f.started) { // its service starts: no longer waiting, at the gateway or the engine
          f.started = true;
          if (backloggedTenants == backlog.length && backlog.length > 1) {
            servedWhileBacklogged[f.tenant] += f.promptLen + f.outputLen;
          }
          unbacklog(f);
        }
      }
    }

    @Override
    public void onFirstToken(EngineRequest r, long nanos) {
      Flight f = (Flight) r.attachment();
      if (r != f.prefillLeg) {
        f.firstToken = nanos;
        long predicted = f.ticket.predictedTtftNanos();
        long actual = nanos - f.dispatched;
        if (predicted >= 0 && actual > 0) {
          ttftError[ttftErrorCount++] = (float) (Math.abs(predicted - actual) / (double) actual);
        }
        f.ticket.firstToken(nanos);
        if (flow != null) {
          push(nanos, POLL, -1, null); // prefill work finished: the load changed
        }
      }
    }

    @Override
    public void onFinished(EngineRequest r, long nanos) {
      Flight f = (Flight) r.attachment();
      if (r == f.prefillLeg) {
        push(nanos, PREFILL_DONE, f.prefillEngine, f);
        return;
      }
      complete(f, nanos);
    }

    @Override
    public void onRejected(EngineRequest r, long nanos, String reason) {
      Flight f = (Flight) r.attachment();
      rejected++;
      f.scheduler.onComplete(f.decision, f.decodeEp, f.prefillEp);
      f.ticket.abandon();
      if (!f.started) {
        f.started = true;
        unbacklog(f);
      }
      if (f.admission != null) {
        push(nanos, RELEASE, -1, f);
      }
    }
  }

  private void complete(Flight f, long nanos) {
    f.scheduler.onComplete(f.decision, f.decodeEp, f.prefillEp);
    f.ticket.finished(nanos, f.outputLen);
    if (f.admission != null) {
      push(nanos, RELEASE, -1, f); // after the engine's step: admissions route at once
    }
    done++;
    lastFinish = Math.max(lastFinish, nanos);
    double ttftMs = (f.firstToken - f.arrival) / 1e6;
    ttft[ttftCount++] = (float) ttftMs;
    double tpotMs = Double.NaN;
    if (f.outputLen > 1) {
      tpotMs = (nanos - f.firstToken) / 1e6 / (f.outputLen - 1);
      tpot[tpotCount++] = (float) tpotMs;
    }
    Slo slo = f.slo;
    boolean ok =
        ttftMs <= slo.ttft().toNanos() / 1e6
            && (Double.isNaN(tpotMs) || tpotMs <= slo.tpot().toNanos() / 1e6);
    if (ok) {
      met++;
    }
    if (f.cls >= 0) {
      ClassStats c = classStats[f.cls];
      c.ttft((float) ttftMs);
      c.outputTokens += f.outputLen;
      if (ok) {
        c.met++;
      }
    }
    long del = Math.max(0, f.delivered);
    promptTokens += f.promptLen;
    outputTokens += f.outputLen;
    reuse = reuse.plus(new ReuseSplit(f.promptLen, f.available, f.captured, del));
    delivered += del;
    int bucket = bucket(f.index);
    bucketPrompt[bucket] += f.promptLen;
    bucketDelivered[bucket] += del;
    if (done % 256 == 0) {
      listener.onProgress(strategy, done, records.size());
    }
  }

  private int bucket(int i) {
    if (spanMillis <= 0) {
      return 0;
    }
    double x = (records.get(i).arrivalMillis() - firstArrivalMillis) / spanMillis;
    return Math.min(TIMELINE_BUCKETS - 1, (int) (x * TIMELINE_BUCKETS));
  }

  // ---------------------------------------------------------------- summary

  private StrategyResult summarise(double wallSeconds) {
    float[] t = Arrays.copyOf(ttft, ttftCount);
    float[] p = Arrays.copyOf(tpot, tpotCount);
    Arrays.sort(t);
    Arrays.sort(p);
    double span = Math.max(1e-9, lastFinish / 1e9);
    long maxBusy = 0;
    long sumBusy = 0;
    long preemptions = 0;
    for (EngineModel e : engines) {
      EngineModel.Stats s = e.stats();
      maxBusy = Math.max(maxBusy, s.busyNanos());
      sumBusy += s.busyNanos();
      preemptions += s.preemptions();
    }
    double meanBusy = (double) sumBusy / engines.length;
    List<Double> cdf = new ArrayList<>(CDF_POINTS + 1);
    for (int k = 0; k <= CDF_POINTS && t.length > 0; k++) {
      int at = (int) Math.min(t.length - 1, Math.round((double) k / CDF_POINTS * (t.length - 1)));
      cdf.add((double) t[at]);
    }
    List<Double> timeline = new ArrayList<>(TIMELINE_BUCKETS);
    for (int b = 0; b < TIMELINE_BUCKETS; b++) {
      timeline.add(
          bucketPrompt[b] == 0 ? Double.NaN : (double) bucketDelivered[b] / bucketPrompt[b]);
    }
    return new StrategyResult(
        strategy.cliName(),
        done,
        promptTokens,
        rejected,
        promptTokens == 0 ? 0 : (double) delivered / promptTokens,
        new StrategyResult.Percentiles(pct(t, 0.5), pct(t, 0.9), pct(t, 0.99)),
        new StrategyResult.Percentiles(pct(p, 0.5), pct(p, 0.9), pct(p, 0.99)),
        outputTokens / span,
        met / span,
        (double) met / records.size(),
        meanBusy == 0 ? 1 : maxBusy / meanBusy,
        reuse,
        preemptions,
        span,
        wallSeconds,
        cdf,
        spanMillis / settings.speed() / 1000 / TIMELINE_BUCKETS,
        timeline,
        dropped,
        median(ttftError, ttftErrorCount),
        jain(servedWhileBacklogged),
        classResults(span));
  }

  private List<StrategyResult.ClassResult> classResults(double span) {
    List<StrategyResult.ClassResult> out = new ArrayList<>();
    for (int k = 0; k < classStats.length; k++) {
      ClassStats c = classStats[k];
      float[] t = Arrays.copyOf(c.ttft, c.done);
      Arrays.sort(t);
      out.add(
          new StrategyResult.ClassResult(
              classNames.get(k),
              c.offered,
              c.done,
              c.dropped,
              new StrategyResult.Percentiles(pct(t, 0.5), pct(t, 0.9), pct(t, 0.99)),
              c.met / span,
              c.offered == 0 ? 0 : (double) c.met / c.offered,
              c.outputTokens / span));
    }
    return out;
  }

  private static double median(float[] v, int n) {
    if (n == 0) {
      return Double.NaN;
    }
    float[] s = Arrays.copyOf(v, n);
    Arrays.sort(s);
    return n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2.0;
  }

  /** Jain's fairness index of {@code x}: (Σx)² / (n Σx²); NaN for fewer than two or all zero. */
  static double jain(double[] x) {
    if (x.length < 2) {
      return Double.NaN;
    }
    double sum = 0;
    double sq = 0;
    for (double v : x) {
      sum += v;
      sq += v * v;
    }
    return sq == 0 ? Double.NaN : sum * sum / (x.length * sq);
  }

  /** Nearest-rank percentile of a sorted sample; NaN when empty. */
  static double pct(float[] sorted, double q) {
    if (sorted.length == 0) {
      return Double.NaN;
    }
    int rank = (int) Math.ceil(q * sorted.length);
    return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))];
  }
}
