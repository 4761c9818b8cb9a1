package io.kvroute.testkit;

import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.CountDownLatch;
import java.util.function.DoubleSupplier;

/**
 * Fault injection for one {@link VllmSimulator}, obtained from {@link VllmSimulator#faults()}. HTTP
 * faults apply to {@code /v1/completions} and {@code /v1/chat/completions}, counted in arrival
 * order; event faults apply to the next KV-event batches the block pool produces.
 *
 * <p>Thread-safe: every method may be called from any thread while requests are running.
 */
public final class SimFaults {

  /** What to do with one generation request; internal to the simulator. */
  record Decision(int status, long extraNanos, boolean hang, int closeAfterChunks, boolean stop) {
    static final Decision NONE = new Decision(0, 0, false, -1, false);
  }

  private final DoubleSupplier random;
  private final Runnable restartPublisher;
  private final Runnable clearAllBlocks;
  private Runnable releaseHeldBatches = () -> {};
  private boolean holdBatches;
  private long arrivals;
  private int failNext;
  private int failNextStatus;
  private long failNth = -1;
  private int failNthStatus;
  private double errorRate;
  private int errorRateStatus;
  private int spikeCount;
  private long spikeNanos;
  private int hangCount;
  private CountDownLatch hangLatch = new CountDownLatch(1);
  private int closeCount;
  private int closeAfterChunks;
  private int stopCount;
  private int dropBatches;
  private int corruptBatches;
  private volatile boolean registrationSilenced;

  SimFaults(DoubleSupplier random, Runnable restartPublisher, Runnable clearAllBlocks) {
    this.random = random;
    this.restartPublisher = restartPublisher;
    this.clearAllBlocks = clearAllBlocks;
  }

  private static void checkStatus(int status) {
    if (status < 400 || status > 599) {
      throw new IllegalArgumentException("status must be in 400..599, was " + status);
    }
  }

  private static void checkCount(int n, String name) {
    if (n < 0) {
      throw new IllegalArgumentException(name + " must be >= 0, was " + n);
    }
  }

  /** The next {@code count} generation requests fail with {@code status} (vLLM error JSON). */
  public synchronized SimFaults failNext(int count, int status) {
    checkCount(count, "count");
    checkStatus(status);
    failNext = count;
    failNextStatus = status;
    return this;
  }

  /** The {@code n}-th generation request from now (1 = the next one) fails with {@code status}. */
  public synchronized SimFaults failNth(int n, int status) {
    if (n < 1) {
      throw new IllegalArgumentException("n must be >= 1, was " + n);
    }
    checkStatus(status);
    failNth = arrivals + n;
    failNthStatus = status;
    return this;
  }

  /** Each generation request fails with {@code status} with probability {@code rate}. */
  public synchronized SimFaults errorRate(double rate, int status) {
    if (!(rate >= 0 && rate <= 1)) {
      throw new IllegalArgumentException("rate must be in [0, 1], was " + rate);
    }
    checkStatus(status);
    errorRate = rate;
    errorRateStatus = status;
    return this;
  }

  /** The next {@code count} requests wait an extra {@code extra} before their first token. */
  public synchronized SimFaults latencySpike(Duration extra, int count) {
    Objects.requireNonNull(extra, "extra");
    checkCount(count, "count");
    spikeNanos = extra.toNanos();
    spikeCount = count;
    return this;
  }

  /**
   * The next {@code count} requests hang (no response bytes) until {@link #releaseHung()}, {@link
   * #reset()} or the simulator closes.
   */
  public synchronized SimFaults hangNext(int count) {
    checkCount(count, "count");
    hangCount = count;
    return this;
  }

  /** Lets every hung request continue normally. */
  public synchronized SimFaults releaseHung() {
    hangLatch.countDown();
    hangLatch = new CountDownLatch(1);
    return this;
  }

  /**
   * The next {@code count} requests have their connection closed abruptly after {@code afterChunks}
   * SSE events (streaming), or after the headers (non-streaming).
   */
  public synchronized SimFaults closeMidStream(int afterChunks, int count) {
    checkCount(afterChunks, "afterChunks");
    checkCount(count, "count");
    closeAfterChunks = afterChunks;
    closeCount = count;
    return this;
  }

  /**
   * The next {@code count} requests finish with {@code finish_reason "stop"} after their first
   * token (as if it were EOS): a NIXL prefill then returns no {@code kv_transfer_params}.
   */
  public synchronized SimFaults stopAfterFirstToken(int count) {
    checkCount(count, "count");
    stopCount = count;
    return this;
  }

  /** The next {@code count} event batches are not sent (their sequence numbers are skipped). */
  public synchronized SimFaults dropEventBatches(int count) {
    checkCount(count, "count");
    dropBatches = count;
    return this;
  }

  /**
   * Holds the event batches back ({@code true}): they are produced and numbered as usual but not
   * sent until {@code holdEventBatches(false)} sends them, in order (a slow or stalled event path:
   * the router sees what the pod caches only later). Bounded by the test's own traffic.
   */
  public SimFaults holdEventBatches(boolean hold) {
    Runnable release;
    synchronized (this) {
      holdBatches = hold;
      release = hold ? null : releaseHeldBatches;
    }
    if (release != null) {
      release.run();
    }
    return this;
  }

  /** Whether event batches are held back. */
  synchronized boolean eventBatchesHeld() {
    return holdBatches;
  }

  synchronized void onRelease(Runnable release) {
    this.releaseHeldBatches = release;
  }

  /** The next {@code count} event batches are sent with a corrupt (undecodable) payload. */
  public synchronized SimFaults corruptEventBatches(int count) {
    checkCount(count, "count");
    corruptBatches = count;
    return this;
  }

  /**
   * Restarts the event publisher as a vLLM restart would: same endpoints, sequence back to 0,
   * replay buffer empty. The block pool is unchanged (use {@link #clearAllBlocks()} as well for a
   * full engine restart).
   */
  public SimFaults restartPublisher() {
    restartPublisher.run();
    return this;
  }

  /** Resets the prefix cache: emits {@code AllBlocksCleared} (vLLM {@code reset_prefix_cache}). */
  public SimFaults clearAllBlocks() {
    clearAllBlocks.run();
    return this;
  }

  /**
   * Stops ({@code true}) or resumes the P2pNccl registration heartbeat (a pod whose proxy should
   * see it expire; {@link KvTransferProtocol#P2P_NCCL} pods with a proxy only).
   */
  public SimFaults silenceRegistration(boolean silenced) {
    registrationSilenced = silenced;
    return this;
  }

  /** Whether the P2pNccl registration heartbeat is silenced. */
  boolean registrationSilenced() {
    return registrationSilenced;
  }

  /** Clears every fault and releases hung requests. */
  public synchronized SimFaults reset() {
    registrationSilenced = false;
    failNext = 0;
    failNth = -1;
    errorRate = 0;
    spikeCount = 0;
    hangCount = 0;
    closeCount = 0;
    stopCount = 0;
    dropBatches = 0;
    corruptBatches = 0;
    releaseHung();
    holdEventBatches(false);
    return this;
  }

  synchronized Decision onArrival() {
    arrivals++;
    int status = 0;
    if (failNext > 0) {
      failNext--;
      status = failNextStatus;
    } else if (arrivals == failNth) {
      status = failNthStatus;
      failNth = -1;
    } else if (errorRate > 0 && random.getAsDouble() < errorRate) {
      status = errorRateStatus;
    }
    long extra = 0;
    if (spikeCount > 0) {
      spikeCount--;
      extra = spikeNanos;
    }
    boolean hang = false;
    if (hangCount > 0) {
      hangCount--;
      hang = true;
    }
    int close = -1;
    if (closeCount > 0) {
      closeCount--;
      close = closeAfterChunks;
    }
    boolean stop = false;
    if (stopCount > 0) {
      stopCount--;
      stop = true;
    }
    if (status == 0 && extra == 0 && !hang && close < 0 && !stop) {
      return Decision.NONE;
    }
    return new Decision(status, extra, hang, close, stop);
  }

  synchronized CountDownLatch hangLatch() {
    return hangLatch;
  }

  /** 0 = send, 1 = drop, 2 = corrupt. */
  synchronized int onBatch() {
    if (dropBatches > 0) {
      dropBatches--;
      return 1;
    }
    if (corruptBatches > 0) {
      corruptBatches--;
      return 2;
    }
    return 0;
  }
}
