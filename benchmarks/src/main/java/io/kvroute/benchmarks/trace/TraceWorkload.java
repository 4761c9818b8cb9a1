package io.kvroute.benchmarks.trace;

import io.kvroute.benchmarks.trace.MooncakeTrace.Request;
import io.kvroute.kvindex.event.EngineHashes;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventCodec;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.SplittableRandom;

/**
 * What {@link IndexTraceRun} replays, built once from a trace: the trace's requests partitioned
 * over the unique workers by seed, and for each unique worker the timeline of its operations in
 * trace time — a lookup per request, and the KV events a vLLM-like engine with a prefix cache emits
 * for it (see {@link IndexTraceRun} for the model and how it differs from Dynamo's). Events are
 * encoded once as vLLM {@code KVEventBatch} payloads (one event per batch), shared by the worker's
 * duplicates. Immutable after construction.
 */
final class TraceWorkload {
  /** The workload's parameters. */
  record Params(
      int workers,
      int duplication,
      long seed,
      int blockTokens,
      int gpuBlocks,
      int decodeBlockTokens,
      double decodeMsPerToken) {}

  final Params p;
  final MooncakeTrace trace;

  /** By trace request: the tokens of its blocks ({@code blockTokens} copies of each block id). */
  final int[][] lookupTokens;

  /** By unique event: its encoded batch. */
  final List<byte[]> payloads = new ArrayList<>();

  /** By unique worker: its operations' trace times (µs) and refs. */
  final long[][] timeUs;

  /**
   * By unique worker: per operation, the unique event's index ({@code >= 0}) or {@code -(request +
   * 1)} for a lookup.
   */
  final int[][] refs;

  // totals over the unique workers (multiply by the duplication factor for the replay)
  long requests;
  long requestBlocks;
  long storedEvents;
  long storedBlocks;
  long removedEvents;
  long removedBlocks;
  long overcommits;
  int idleWorkers;

  TraceWorkload(MooncakeTrace trace, Params p) {
    this.p = p;
    this.trace = trace;
    List<Request> reqs = trace.requests;
    lookupTokens = new int[reqs.size()][];
    long maxId = 0;
    for (int r = 0; r < reqs.size(); r++) {
      long[] ids = reqs.get(r).hashIds();
      int[] t = new int[ids.length * p.blockTokens()];
      for (int b = 0; b < ids.length; b++) {
        Arrays.fill(t, b * p.blockTokens(), (b + 1) * p.blockTokens(), (int) ids[b]);
        maxId = Math.max(maxId, ids[b]);
      }
      lookupTokens[r] = t;
    }
    // partition: each request to a random worker (in file order), as mooncake_bench does
    List<List<Integer>> byWorker = new ArrayList<>();
    for (int w = 0; w < p.workers(); w++) {
      byWorker.add(new ArrayList<>());
    }
    SplittableRandom rnd = new SplittableRandom(p.seed());
    for (int r = 0; r < reqs.size(); r++) {
      byWorker.get(rnd.nextInt(p.workers())).add(r);
    }
    timeUs = new long[p.workers()][];
    refs = new int[p.workers()][];
    long[] decodeId = {maxId + 1};
    for (int w = 0; w < p.workers(); w++) {
      List<Integer> mine = byWorker.get(w);
      mine.sort((a, b) -> Long.compare(reqs.get(a).timestampMs(), reqs.get(b).timestampMs()));
      if (mine.isEmpty()) {
        idleWorkers++;
      }
      new Engine(mine, decodeId).run(w);
    }
  }

  static long engineHash(long blockId) {
    long z = blockId + 0x9E3779B97F4A7C15L;
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    z ^= z >>> 31;
    return z == 0 ? 1 : z;
  }

  private int storedEvent(long[] blockIds, long parentId) {
    long[] hashes = new long[blockIds.length];
    int[] tokens = new int[blockIds.length * p.blockTokens()];
    for (int i = 0; i < blockIds.length; i++) {
      hashes[i] = engineHash(blockIds[i]);
      Arrays.fill(tokens, i * p.blockTokens(), (i + 1) * p.blockTokens(), (int) blockIds[i]);
    }
    KvEvent e =
        KvEvent.BlockStored.of(
            EngineHashes.ofInts(hashes),
            parentId < 0 ? null : EngineHashes.ofInts(engineHash(parentId)),
            tokens,
            p.blockTokens());
    storedEvents++;
    storedBlocks += blockIds.length;
    return add(e);
  }

  private int removedEvent(long[] blockIds) {
    long[] hashes = new long[blockIds.length];
    for (int i = 0; i < blockIds.length; i++) {
      hashes[i] = engineHash(blockIds[i]);
    }
    removedEvents++;
    removedBlocks += blockIds.length;
    return add(KvEvent.BlockRemoved.of(EngineHashes.ofInts(hashes)));
  }

  private int add(KvEvent e) {
    payloads.add(KvEventCodec.encode(KvEventBatch.of(0.0, List.of(e)).withDataParallelRank(0)));
    return payloads.size() - 1;
  }

  /**
   * One unique worker's engine: a block pool of {@code gpuBlocks} with a prefix cache (a request's
   * longest cached prefix is reused; its other blocks are computed and stored; blocks of finished
   * requests stay cached and are evicted least recently freed first, tail blocks before their
   * parents, as vLLM frees them) driven by the worker's requests in time order: arrival (a lookup,
   * then the removal of what the new blocks evicted, then the store of the new prompt blocks, all
   * at the arrival time), one decode block per {@code decodeBlockTokens} output tokens (stored one
   * by one as they fill, {@code decodeMsPerToken} apart per token), completion (its blocks are
   * freed).
   */
  private final class Engine {
    private static final int ARRIVE = 0;
    private static final int DECODE = 1;
    private static final int DONE = 2;

    final List<Integer> mine;
    final long[] decodeId;
    final Map<Long, int[]> refCount = new HashMap<>(); // block id -> {refs}
    final LinkedHashSet<Long> free = new LinkedHashSet<>(); // cached, unreferenced; LRU first
    final Map<Integer, long[]> held = new HashMap<>(); // request -> its blocks, in order
    final List<Long> times = new ArrayList<>();
    final List<Integer> ops = new ArrayList<>();
    long seq;

    Engine(List<Integer> mine, long[] decodeId) {
      this.mine = mine;
      this.decodeId = decodeId;
    }

    void run(int w) {
      // agenda: {time µs, sequence, kind, request, k}
      PriorityQueue<long[]> agenda =
          new PriorityQueue<>(
              (a, b) -> a[0] != b[0] ? Long.compare(a[0], b[0]) : Long.compare(a[1], b[1]));
      for (int r : mine) {
        agenda.add(new long[] {trace.requests.get(r).timestampMs() * 1000, seq++, ARRIVE, r, 0});
      }
      while (!agenda.isEmpty()) {
        long[] a = agenda.poll();
        long t = a[0];
        int r = (int) a[3];
        Request req = trace.requests.get(r);
        switch ((int) a[2]) {
          case ARRIVE -> {
            op(t, -(r + 1));
            requests++;
            requestBlocks += req.hashIds().length;
            arrive(t, r, req);
            int decodeBlocks = req.outputLength() / p.decodeBlockTokens();
            double perBlock = p.decodeBlockTokens() * p.decodeMsPerToken() * 1000;
            for (int k = 1; k <= decodeBlocks; k++) {
              agenda.add(new long[] {t + (long) (k * perBlock), seq++, DECODE, r, k});
            }
            long done = t + (long) (req.outputLength() * p.decodeMsPerToken() * 1000) + 1;
            agenda.add(new long[] {done, seq++, DONE, r, 0});
          }
          case DECODE -> decode(t, r);
          default -> finish(r);
        }
      }
      timeUs[w] = times.stream().mapToLong(Long::longValue).toArray();
      refs[w] = ops.stream().mapToInt(Integer::intValue).toArray();
    }

    void op(long t, int ref) {
      times.add(t);
      ops.add(ref);
    }

    void arrive(long t, int r, Request req) {
      long[] ids = req.hashIds();
      int hits = 0;
      while (hits < ids.length && refCount.containsKey(ids[hits])) {
        hits++;
      }
      for (int i = 0; i < hits; i++) {
        take(ids[i]);
      }
      long[] fresh = Arrays.copyOfRange(ids, hits, ids.length);
      allocate(t, fresh);
      held.put(r, ids.clone());
      if (fresh.length > 0) {
        op(t, storedEvent(fresh, hits > 0 ? ids[hits - 1] : -1));
      }
    }

    void decode(long t, int r) {
      long[] mine = held.get(r);
      long id = decodeId[0]++;
      allocate(t, new long[] {id});
      long[] grown = Arrays.copyOf(mine, mine.length + 1);
      grown[mine.length] = id;
      held.put(r, grown);
      op(t, storedEvent(new long[] {id}, mine.length > 0 ? mine[mine.length - 1] : -1));
    }

    void finish(int r) {
      long[] mine = held.remove(r);
      for (int i = mine.length - 1; i >= 0; i--) { // tail first: evicted before its parents
        int[] c = refCount.get(mine[i]);
        if (c != null && --c[0] == 0) {
          free.add(mine[i]);
        }
      }
    }

    /** References a cached block (a prefix hit, or a block already present). */
    void take(long id) {
      int[] c = refCount.get(id);
      if (c[0]++ == 0) {
        free.remove(id);
      }
    }

    /** Allocates blocks for {@code ids} (absent ones), evicting first if the pool is full. */
    void allocate(long t, long[] ids) {
      int need = 0;
      for (long id : ids) {
        if (!refCount.containsKey(id)) {
          need++;
        }
      }
      ArrayDeque<Long> evicted = new ArrayDeque<>();
      while (refCount.size() + need > p.gpuBlocks() && !free.isEmpty()) {
        long victim = free.iterator().next();
        free.remove(victim);
        refCount.remove(victim);
        evicted.add(victim);
      }
      if (refCount.size() + need > p.gpuBlocks()) {
        overcommits++;
      }
      if (!evicted.isEmpty()) {
        op(t, removedEvent(evicted.stream().mapToLong(Long::longValue).toArray()));
      }
      for (long id : ids) {
        if (refCount.containsKey(id)) {
          take(id);
        } else {
          refCount.put(id, new int[] {1});
        }
      }
    }
  }

  /** Operations of one replay of all workers (lookups + events), duplicates included. */
  long totalOps() {
    return (requests + storedEvents + removedEvents) * p.duplication();
  }

  /** Blocks touched by one replay (request blocks + event blocks), duplicates included. */
  long totalBlocks() {
    return (requestBlocks + storedBlocks + removedBlocks) * p.duplication();
  }
}
