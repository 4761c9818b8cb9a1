package io.kvroute.testkit.engine;

import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.hash.BlockExtraKeys;
import io.kvroute.kvindex.hash.BlockHash;
import io.kvroute.kvindex.hash.HashAlgorithm;
import io.kvroute.kvindex.hash.VllmBlockHasher;
import io.kvroute.testkit.internal.BlockPool;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Consumer;

/**
 * One vLLM engine in virtual time: vLLM V1's scheduler loop (continuous batching under a token
 * budget with chunked prefill, {@code max_num_seqs}, FCFS waiting queue, preemption of the newest
 * running request when the KV cache is full) over the same block pool as the real-time {@code
 * VllmSimulator} (prefix caching of full blocks, LRU eviction of freed cached blocks, KV events
 * with vLLM's hashing), with step durations from the profile's {@link CostModel}.
 *
 * <h2>Driving it</h2>
 *
 * Nothing sleeps and nothing reads a clock: the caller owns time. {@link #submit} adds a request;
 * {@link #startStep(long)} schedules one step at {@code now} (allocating blocks, emitting that
 * step's KV events as one batch, as vLLM publishes one batch per step) and returns when it ends;
 * {@link #finishStep(long)} applies its outputs at that time (first tokens, finished requests) and
 * the caller starts the next step. A decode leg waiting for remote KV needs a {@code startStep} at
 * or after its {@link EngineRequest#remoteKvReadyAt()}.
 *
 * <pre>{@code
 * EngineModel e = EngineModel.builder(EngineProfile.LLAMA_70B_FP8_2XH100).listener(l).build();
 * e.submit(request, 0);
 * long t = 0;
 * for (long end; (end = e.startStep(t)) >= 0; t = end) {
 *   e.finishStep(end);
 * }
 * }</pre>
 *
 * <p>Not thread-safe: one thread drives an engine (a replay drives a whole fleet from one thread).
 */
public final class EngineModel {
  private static final int VOCAB = 128_000;

  private final String name;
  private final EngineProfile profile;
  private final CostModel cost;
  private final BlockPool pool;
  private final VllmBlockHasher hasher;
  private final EngineListener listener;
  private final Consumer<List<KvEvent>> eventSink;
  private final ArrayDeque<Req> waiting = new ArrayDeque<>();
  private final ArrayList<Req> running = new ArrayList<>();
  private final List<KvEvent> stepEvents = new ArrayList<>();
  private final Map<EngineRequest, Req> held = new IdentityHashMap<>();
  private final ArrayList<Req> skipped = new ArrayList<>();

  private Req[] sched = new Req[64];
  private int[] schedTokens = new int[64];
  private int numSched;
  private boolean busy;
  private long stepEnd;

  private long steps;
  private long busyNanos;
  private long promptTokens;
  private long cachedTokens;
  private long computedPrefillTokens;
  private long outputTokens;
  private long preemptions;
  private long rejected;
  private long finished;

  /** A request's state in the engine. */
  private static final class Req {
    final EngineRequest request;
    final BlockPool.Seq seq;
    final int promptLen;
    int numComputed;
    int outputs;
    int cachedTokens = -1;
    // remote KV (decode leg): 0 none, 1 not yet allocated, 2 loading, 3 loaded
    int remote;
    boolean done;

    Req(EngineRequest request, BlockPool.Seq seq) {
      this.request = request;
      this.seq = seq;
      this.promptLen = request.promptLength();
      this.remote = request.remoteKvReadyAt() >= 0 ? 1 : 0;
    }
  }

  private EngineModel(Builder b) {
    this.name = b.name;
    this.profile = b.profile;
    this.cost = b.profile.costModel();
    this.listener = b.listener;
    this.eventSink = b.eventSink;
    this.hasher =
        VllmBlockHasher.builder()
            .algorithm(b.hashAlgorithm)
            .blockSize(b.profile.blockSize())
            .hashSeed(b.hashSeed)
            .build();
    this.pool = new BlockPool(b.profile.kvBlocks(), 0, hasher, stepEvents::addAll);
  }

  /** A builder for an engine with {@code profile}. */
  public static Builder builder(EngineProfile profile) {
    return new Builder(profile);
  }

  /** The engine's name (its pod id in events and metrics). */
  public String name() {
    return name;
  }

  /** The profile. */
  public EngineProfile profile() {
    return profile;
  }

  /** The vLLM-exact hasher of this engine's blocks (algorithm, seed and block size). */
  public VllmBlockHasher hasher() {
    return hasher;
  }

  // ---------------------------------------------------------------- requests

  /**
   * Queues a request at {@code nanos}. A request that can never run (prompt + output above {@code
   * max_model_len}, or more blocks than the cache has) is rejected through the listener.
   */
  public void submit(EngineRequest request, long nanos) {
    Objects.requireNonNull(request, "request");
    int total = request.promptLength() + request.maxTokens();
    if (total > profile.maxModelLen()) {
      rejected++;
      listener.onRejected(
          request,
          nanos,
          "prompt + output = " + total + " tokens > max_model_len " + profile.maxModelLen());
      return;
    }
    if (!pool.fits(total)) {
      rejected++;
      listener.onRejected(
          request, nanos, total + " tokens need more than the " + pool.numBlocks() + " KV blocks");
      return;
    }
    BlockPool.Seq seq =
        new BlockPool.Seq(
            request.prompt(),
            BlockExtraKeys.NONE,
            null,
            null,
            request.blockHashes(),
            request.maxTokens());
    waiting.addLast(new Req(request, seq));
    promptTokens += request.promptLength();
  }

  /**
   * Frees the blocks of a finished request submitted with {@link EngineRequest#holdKv()} (the KV
   * transfer to its decode engine is over). Unknown or already released requests are ignored.
   */
  public void release(EngineRequest request) {
    Req r = held.remove(request);
    if (r != null) {
      pool.free(r.seq);
    }
  }

  /**
   * Prompt tokens of {@code hashes} (this engine's block hashes of a prompt of {@code promptLength}
   * tokens) cached on its GPU now, capped like vLLM's lookup at {@code promptLength - 1}: the true
   * state, with no event lag.
   */
  public int cachedPrefixTokens(List<BlockHash> hashes, int promptLength) {
    int max = Math.max(0, (promptLength - 1) / profile.blockSize());
    return pool.cachedPrefixBlocks(hashes, max) * profile.blockSize();
  }

  // ---------------------------------------------------------------- steps

  /** Whether a step is in flight (started and not finished). */
  public boolean busy() {
    return busy;
  }

  /** Whether any request is queued or running. */
  public boolean hasWork() {
    return !waiting.isEmpty() || !running.isEmpty();
  }

  /**
   * Schedules one step at {@code nanos} (vLLM's {@code schedule()}): running requests first (one
   * decode token each, or their next prefill chunk), preempting the newest running request when
   * blocks run out; then waiting requests in order while the token budget, {@code max_num_seqs} and
   * the free blocks allow. The step's KV events go to the sink as one list.
   *
   * @return when the step ends, or -1 when nothing can be scheduled now (idle)
   * @throws IllegalStateException if a step is already in flight
   */
  public long startStep(long nanos) {
    if (busy) {
      throw new IllegalStateException(name + ": a step is already in flight");
    }
    schedule(nanos);
    flushEvents();
    if (numSched == 0) {
      return -1;
    }
    int batched = 0;
    long pairs = 0;
    long decodeContext = 0;
    for (int i = 0; i < numSched; i++) {
      Req r = sched[i];
      int n = schedTokens[i];
      int before = r.numComputed - n;
      batched += n;
      if (n == 1 && before == r.seq.numTokens() - 1 && before >= r.promptLen) {
        decodeContext += before + 1;
      } else {
        pairs += CostModel.attentionPairs(n, before);
        computedPrefillTokens += n;
      }
    }
    long d = cost.stepNanos(batched, pairs, decodeContext);
    steps++;
    busyNanos += d;
    busy = true;
    stepEnd = nanos + d;
    return stepEnd;
  }

  /**
   * Applies the outputs of the step in flight at {@code nanos} (normally the time {@link
   * #startStep} returned): requests whose tokens are all computed sample one token; first tokens
   * and finished requests are reported; finished requests free their blocks.
   *
   * @throws IllegalStateException if no step is in flight
   */
  public void finishStep(long nanos) {
    if (!busy) {
      throw new IllegalStateException(name + ": no step in flight");
    }
    busy = false;
    boolean anyDone = false;
    for (int i = 0; i < numSched; i++) {
      Req r = sched[i];
      sched[i] = null;
      if (r.done || r.numComputed < r.seq.numTokens()) {
        continue; // a partial prefill chunk: nothing sampled
      }
      r.seq.append(outputToken(r.request.id(), r.outputs));
      r.outputs++;
      outputTokens++;
      if (r.outputs == 1) {
        listener.onFirstToken(r.request, nanos);
      }
      if (r.outputs >= r.request.maxTokens()) {
        r.done = true;
        anyDone = true;
        finished++;
        if (r.request.holdKv()) {
          held.put(r.request, r);
        } else {
          pool.free(r.seq);
        }
        listener.onFinished(r.request, nanos);
      }
    }
    numSched = 0;
    if (anyDone) {
      running.removeIf(r -> r.done);
    }
  }

  private void schedule(long nanos) {
    numSched = 0;
    int budget = profile.maxNumBatchedTokens();
    boolean preempted = false;
    int i = 0;
    while (i < running.size() && budget > 0) {
      Req r = running.get(i);
      int n = Math.min(r.seq.numTokens() - r.numComputed, budget);
      if (n <= 0) {
        i++;
        continue;
      }
      boolean ok = false;
      while (true) {
        if (pool.growSlots(r.seq, r.numComputed, n)) {
          ok = true;
          break;
        }
        Req victim = running.remove(running.size() - 1);
        preempt(victim);
        preempted = true;
        if (victim == r) {
          break;
        }
      }
      if (!ok) {
        break;
      }
      add(r, n);
      budget -= n;
      i++;
    }
    if (!preempted) {
      scheduleWaiting(nanos, budget);
    }
    for (int k = 0; k < numSched; k++) {
      Req r = sched[k];
      int n = schedTokens[k];
      pool.cacheFullBlocks(r.seq, Math.min(r.numComputed + n, r.seq.numTokens()));
      r.numComputed += n;
    }
  }

  private void scheduleWaiting(long nanos, int budget) {
    skipped.clear();
    while (!waiting.isEmpty() && budget > 0 && running.size() < profile.maxNumSeqs()) {
      Req r = waiting.peekFirst();
      if (r.remote == 2) {
        if (nanos < r.request.remoteKvReadyAt()) {
          skipped.add(waiting.pollFirst());
          continue;
        }
        // the transfer is over: the received blocks are cached, the last token is computed here
        r.remote = 3;
        r.numComputed = r.promptLen - 1;
        pool.cacheFullBlocks(r.seq, r.numComputed);
      }
      int computed;
      int n;
      if (r.seq.numBlocks() == 0) {
        int hit = pool.lookup(r.seq).gpuTokens();
        if (r.remote == 1) {
          int external = Math.max(0, r.promptLen - 1 - hit);
          if (!pool.allocateSlots(r.seq, hit, external)) {
            break;
          }
          r.remote = 2;
          firstSchedule(r, nanos, pool.cachedTokens(r.seq) + external);
          skipped.add(waiting.pollFirst());
          continue;
        }
        // lookup and allocation are one atomic step here: the hit cannot vanish in between
        computed = hit;
        n = Math.min(r.seq.numTokens() - hit, budget);
        if (!pool.allocateSlots(r.seq, hit, n)) {
          break;
        }
      } else {
        computed = r.numComputed;
        n = Math.min(r.seq.numTokens() - computed, budget);
        if (!pool.growSlots(r.seq, computed, n)) {
          break;
        }
      }
      waiting.pollFirst();
      running.add(r);
      r.numComputed = computed;
      firstSchedule(r, nanos, computed);
      add(r, n);
      budget -= n;
    }
    for (int k = skipped.size() - 1; k >= 0; k--) {
      waiting.addFirst(skipped.get(k));
    }
  }

  private void firstSchedule(Req r, long nanos, int cached) {
    if (r.cachedTokens < 0) {
      r.cachedTokens = cached;
      cachedTokens += cached;
      listener.onScheduled(r.request, nanos, cached);
    }
  }

  private void preempt(Req r) {
    pool.preempt(r.seq);
    r.numComputed = 0;
    r.remote = 0; // received KV is gone: recompute locally, as vLLM does
    preemptions++;
    waiting.addFirst(r);
  }

  private void add(Req r, int n) {
    if (numSched == sched.length) {
      sched = Arrays.copyOf(sched, numSched * 2);
      schedTokens = Arrays.copyOf(schedTokens, numSched * 2);
    }
    sched[numSched] = r;
    schedTokens[numSched] = n;
    numSched++;
  }

  private void flushEvents() {
    if (!stepEvents.isEmpty()) {
      List<KvEvent> batch = new ArrayList<>(stepEvents);
      stepEvents.clear();
      eventSink.accept(batch);
    }
  }

  /** The {@code index}-th generated token of request {@code id}: deterministic, in [0, 128000). */
  static int outputToken(long id, int index) {
    long z = id * 0x9E3779B97F4A7C15L + index * 0xBF58476D1CE4E5B9L + 0x94D049BB133111EBL;
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    z ^= z >>> 31;
    return (int) Long.remainderUnsigned(z, VOCAB);
  }

  // ---------------------------------------------------------------- metrics (vLLM's gauges)

  /** {@code vllm:num_requests_waiting}: queued requests (including decode legs awaiting KV). */
  public int waitingRequests() {
    return waiting.size();
  }

  /** {@code vllm:num_requests_running}. */
  public int runningRequests() {
    return running.size();
  }

  /** {@code vllm:kv_cache_usage_perc}: fraction of blocks held by requests (0..1). */
  public double kvCacheUsage() {
    return pool.usage();
  }

  /** Counters since the engine was built. */
  public Stats stats() {
    return new Stats(
        steps,
        busyNanos,
        promptTokens,
        cachedTokens,
        computedPrefillTokens,
        outputTokens,
        preemptions,
        rejected,
        finished);
  }

  /** The block pool (for tests in this module). */
  BlockPool pool() {
    return pool;
  }

  @Override
  public String toString() {
    return "EngineModel{"
        + name
        + ", "
        + profile.name()
        + ", waiting="
        + waiting.size()
        + ", running="
        + running.size()
        + "}";
  }

  /**
   * Engine counters.
   *
   * @param steps steps run
   * @param busyNanos virtual time spent in steps
   * @param promptTokens prompt tokens of accepted requests
   * @param cachedTokens prompt tokens found cached when first scheduled (vLLM's {@code
   *     num_cached_tokens}, summed)
   * @param computedPrefillTokens prompt tokens computed (including recomputation after preemption)
   * @param outputTokens tokens generated
   * @param preemptions requests preempted
   * @param rejected requests rejected
   * @param finished requests finished
   */
  public record Stats(
      long steps,
      long busyNanos,
      long promptTokens,
      long cachedTokens,
      long computedPrefillTokens,
      long outputTokens,
      long preemptions,
      long rejected,
      long finished) {}

  /** Builds {@link EngineModel}s; not thread-safe. */
  public static final class Builder {
    private final EngineProfile profile;
    private String name = "engine";
    private HashAlgorithm hashAlgorithm = HashAlgorithm.SHA256;
    private String hashSeed = "0";
    private EngineListener listener = EngineListener.NONE;
    private Consumer<List<KvEvent>> eventSink = events -> {};

    private Builder(EngineProfile profile) {
      this.profile = Objects.requireNonNull(profile, "profile");
    }

    /** The engine's name (default {@code engine}). */
    public Builder name(String name) {
      this.name = Objects.requireNonNull(name, "name");
      return this;
    }

    /** vLLM {@code --prefix-caching-hash-algo} (default {@code sha256}). */
    public Builder hashAlgorithm(HashAlgorithm algorithm) {
      this.hashAlgorithm = Objects.requireNonNull(algorithm, "hashAlgorithm");
      return this;
    }

    /** {@code PYTHONHASHSEED} (default {@code "0"}, as the real-time simulator). */
    public Builder hashSeed(String seed) {
      this.hashSeed = Objects.requireNonNull(seed, "hashSeed");
      return this;
    }

    /** Receives request progress (default {@link EngineListener#NONE}). */
    public Builder listener(EngineListener listener) {
      this.listener = Objects.requireNonNull(listener, "listener");
      return this;
    }

    /** Receives each step's KV events as one list, as vLLM publishes one batch per step. */
    public Builder eventSink(Consumer<List<KvEvent>> sink) {
      this.eventSink = Objects.requireNonNull(sink, "eventSink");
      return this;
    }

    /** Builds the engine (allocating its block pool). */
    public EngineModel build() {
      return new EngineModel(this);
    }
  }
}
