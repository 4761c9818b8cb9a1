package io.kvroute.testkit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import io.kvroute.testkit.internal.BadRequest;
import io.kvroute.testkit.internal.BlockPool;
import io.kvroute.testkit.internal.RequestLog;
import io.kvroute.testkit.internal.Responder;
import io.kvroute.testkit.internal.SimHttp;
import io.kvroute.testkit.internal.SimHttp.AbortConnection;
import java.io.IOException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Serves {@code /v1/completions} and {@code /v1/chat/completions}: injected faults, validation, the
 * KV-transfer plan, admission (running slots, then KV blocks), the simulated prefill, token by
 * token generation into the block pool, accounting, and the response.
 *
 * <p>Thread-safe: each request runs on its own server thread; shared state lives in the pool, the
 * metrics and the transfers, which are thread-safe.
 */
final class Generation {
  private final VllmSimulator.Builder b;
  private final EngineTokenizer tokenizer;
  private final Semaphore slots;
  private final BlockPool pool;
  private final SimFaults faults;
  private final SimMetrics metrics;
  private final KvTransfers transfers;
  private final RequestLog log;
  private final AtomicLong requestCounter = new AtomicLong();
  private volatile boolean closed;

  Generation(
      VllmSimulator.Builder b,
      BlockPool pool,
      SimFaults faults,
      SimMetrics metrics,
      KvTransfers transfers,
      RequestLog log) {
    this.b = b;
    this.tokenizer = b.tokenizer;
    this.slots = new Semaphore(b.maxRunning, true);
    this.pool = pool;
    this.faults = faults;
    this.metrics = metrics;
    this.transfers = transfers;
    this.log = log;
  }

  /**
   * Serves one generation request.
   *
   * @throws AbortConnection to drop the connection (a fault, or the pod closing)
   */
  void serve(HttpExchange ex, boolean chat) throws IOException {
    long arrival = b.nanoClock.getAsLong();
    if (!SimHttp.requireMethod(ex, "POST")) {
      return;
    }
    String raw = SimHttp.readBody(ex);
    SimFaults.Decision fault = faults.onArrival();
    JsonNode json = log.record(ex, raw); // after the fault decision: a recorded request has one
    if (fault.hang()) {
      awaitRelease();
    }
    if (fault.status() != 0) {
      fail(ex, new BadRequest(fault.status(), "injected failure (simulator fault)"));
      return;
    }
    GenRequest g;
    try {
      g = GenRequest.parse(b, pool, requestCounter, ex, json, chat);
    } catch (BadRequest e) {
      fail(ex, e);
      return;
    }
    try {
      run(ex, g, fault, arrival);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AbortConnection();
    }
  }

  /** A hung request waits for the fault to be released, or drops its connection on close. */
  private void awaitRelease() {
    CountDownLatch latch = faults.hangLatch();
    try {
      while (!latch.await(50, TimeUnit.MILLISECONDS)) {
        abortIfClosed();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AbortConnection();
    }
    abortIfClosed();
  }

  /** From now on, requests still waiting (hung, or for KV blocks) drop their connections. */
  void close() {
    closed = true;
  }

  private void abortIfClosed() {
    if (closed) {
      throw new AbortConnection();
    }
  }

  private void fail(HttpExchange ex, BadRequest e) throws IOException {
    metrics.countError();
    SimHttp.sendError(ex, e.status(), e.getMessage());
  }

  private void run(HttpExchange ex, GenRequest g, SimFaults.Decision fault, long arrival)
      throws IOException, InterruptedException {
    KvTransfers.Plan plan = null;
    metrics.queued(g.lora());
    boolean admitted = false;
    BlockPool.Seq seq = new BlockPool.Seq(g.prompt(), g.extras(), g.loraId(), g.lora());
    BlockPool.Hit hit;
    try {
      try {
        plan = transfers.plan(g.body(), g.id());
      } catch (BadRequest e) {
        fail(ex, e);
        return;
      }
      slots.acquire();
      admitted = true;
      int total = g.prompt().length + g.maxTokens();
      while (true) {
        hit = pool.lookup(seq);
        if (pool.allocate(seq, hit.gpuTokens(), total)) {
          break;
        }
        abortIfClosed();
        pool.awaitFree(TimeUnit.MILLISECONDS.toNanos(20));
      }
    } catch (InterruptedException | RuntimeException e) {
      if (admitted) {
        slots.release();
      }
      if (plan != null && plan.incoming != null) {
        plan.incoming.release();
      }
      throw e;
    } finally {
      metrics.dequeued(g.lora());
    }
    metrics.started(g.lora());
    boolean heldForTransfer = false;
    boolean finished = false;
    try {
      int promptLen = g.prompt().length;
      int cached = hit.tokens();
      if (plan.incoming != null) {
        int common = commonPrefix(plan.incoming.prompt, g.prompt());
        cached = Math.max(cached, Math.min(common, promptLen - 1));
        plan.incoming.release();
      } else {
        cached = Math.max(cached, transfers.loadFromSharedStore(seq, promptLen));
      }
      int uncached = promptLen - cached;
      double threshold = g.body().path("cache_hit_threshold").asDouble(0);
      if (threshold > 0 && (double) cached / promptLen < threshold) {
        // llm-d's cache_hit_threshold (vLLM RFC #24256): refuse without computing
        long ttftNanos = b.nanoClock.getAsLong() - arrival;
        Responder r = responder(ex, g, fault);
        r.begin();
        r.token("", "cache_threshold");
        metrics.countSuccess(promptLen, cached, 0, ttftNanos);
        finished = true;
        finishRequest(g, seq, false);
        r.finish("", "cache_threshold", usage(promptLen, 0, cached), null);
        return;
      }
      long prefill =
          b.costModel != null
              ? b.costModel.prefillNanos(promptLen, cached, b.maxNumBatchedTokens)
              : b.latency.prefillNanos(uncached);
      b.sleeper.sleep(prefill + fault.extraNanos());
      pool.cacheFullBlocks(seq, promptLen);
      transfers.saveToSharedStore(seq, promptLen);
      long ttftNanos = b.nanoClock.getAsLong() - arrival;
      int outTokens = fault.stop() ? 1 : g.maxTokens();
      String finish = fault.stop() ? "stop" : "length";
      long seed = fingerprint(g.prompt());
      ObjectNode ktpOut = null;
      if (plan.nixlProducer && "length".equals(finish) && outTokens == 1) {
        ktpOut = transfers.nixlParams(g.internalId(), seq);
      } else if (transfers.wantsFirstToken(g.body())) {
        ktpOut = SimHttp.NODES.objectNode();
        ktpOut.put("first_tok", tokenizer.encodeText(SimTokenizer.outputPiece(seed, 0))[0]);
      }
      Responder r = responder(ex, g, fault);
      r.begin();
      String text = decode(r, seq, seed, outTokens, finish);
      if (ktpOut != null) {
        heldForTransfer = true;
        transfers.holdForPull(g.internalId(), seq, g.prompt());
      } else if (plan.holdKey != null) {
        heldForTransfer = true;
        transfers.holdForRendezvous(plan.holdKey, seq, g.prompt());
      }
      ObjectNode usage = usage(promptLen, outTokens, cached);
      // account before the last bytes go out, so a client that saw the response sees the stats
      metrics.countSuccess(promptLen, cached, outTokens, ttftNanos);
      finished = true;
      finishRequest(g, seq, heldForTransfer);
      r.finish(text, finish, usage, ktpOut);
    } finally {
      if (!finished) {
        finishRequest(g, seq, heldForTransfer);
      }
    }
  }

  /**
   * Generates {@code outTokens} pieces, one per decode step: each is appended to the sequence (its
   * full blocks cached) and streamed.
   *
   * @return the whole generated text
   */
  private String decode(Responder r, BlockPool.Seq seq, long seed, int outTokens, String finish)
      throws IOException, InterruptedException {
    StringBuilder text = new StringBuilder();
    for (int i = 0; i < outTokens; i++) {
      if (i > 0) {
        b.sleeper.sleep(
            b.costModel != null
                ? b.costModel.decodeStepNanos(1, seq.numTokens())
                : b.latency.perOutputToken().toNanos());
      }
      String piece = SimTokenizer.outputPiece(seed, i);
      for (int id : tokenizer.encodeText(piece)) {
        seq.append(id);
      }
      pool.cacheFullBlocks(seq, seq.numTokens() - 1);
      text.append(piece);
      r.token(piece, i == outTokens - 1 ? finish : null);
    }
    return text.toString();
  }

  private Responder responder(HttpExchange ex, GenRequest g, SimFaults.Decision fault) {
    long created = b.clock.millis() / 1000;
    return new Responder(
        ex,
        new Responder.Head(g.id(), g.model(), g.chat(), g.streaming(), created),
        fault.closeAfterChunks());
  }

  private void finishRequest(GenRequest g, BlockPool.Seq seq, boolean heldForTransfer) {
    if (!heldForTransfer) {
      pool.free(seq);
    }
    metrics.ended(g.lora());
    slots.release();
  }

  private static int commonPrefix(int[] a, int[] c) {
    int n = Math.min(a.length, c.length);
    int i = 0;
    while (i < n && a[i] == c[i]) {
      i++;
    }
    return i;
  }

  private static long fingerprint(int[] tokens) {
    long h = 0xcbf29ce484222325L;
    for (int t : tokens) {
      h ^= t;
      h *= 0x100000001b3L;
    }
    return h;
  }

  private static ObjectNode usage(int prompt, int completion, int cached) {
    ObjectNode u = SimHttp.NODES.objectNode();
    u.put("prompt_tokens", prompt);
    u.put("total_tokens", prompt + completion);
    u.put("completion_tokens", completion);
    u.putObject("prompt_tokens_details").put("cached_tokens", cached);
    return u;
  }
}
