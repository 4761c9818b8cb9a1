package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import io.kvroute.kvindex.fleet.FleetView;
import io.kvroute.scoring.internal.Hashing;
import java.util.HashMap;
import java.util.List;
import java.util.Optional;
import java.util.random.RandomGenerator;

/** The per-request {@link SchedulingContext}. Confined to the thread running one pick. */
final class CycleContext extends ContextBase {
  private final Scheduler scheduler;
  private final List<Endpoint> all;
  // Whether this cycle times its plugins (set by the scheduler; sampled).
  boolean timePlugins;
  private final int[] tokens;
  private String profileName = "";
  private HashMap<String, Integer> indexById;

  private boolean[] metricsLooked;
  private EndpointMetrics[] metricsCache;

  private long[] requestKeys;
  private int[] preciseMatched;
  private double[] preciseWeighted;

  private FleetView fleetView;
  private boolean fleetRead;

  private String approxText;
  private long[] approxHashes;
  private int[] approxMatched;

  CycleContext(Scheduler scheduler, SchedulingRequest request, RandomGenerator random, long now) {
    super(request, random, now);
    this.scheduler = scheduler;
    this.all = request.candidates();
    this.tokens = request.tokens();
  }

  Scheduler scheduler() {
    return scheduler;
  }

  void profile(String name) {
    this.profileName = name;
  }

  void peer(Endpoint peer) {
    this.peer = peer;
  }

  @Override
  public String profileName() {
    return profileName;
  }

  @Override
  public int promptTokens() {
    if (tokens != null) {
      return tokens.length;
    }
    return approximateTokenCount();
  }

  /**
   * The index in the request's candidates of {@code e}, which a caller found at position {@code
   * hint} of its own (possibly filtered) list: when no filter dropped anything the positions agree
   * and no lookup is needed.
   */
  int slotOf(Endpoint e, int hint) {
    if (hint >= 0 && hint < all.size() && all.get(hint) == e) {
      return hint;
    }
    return indexOf(e.id());
  }

  int indexOf(String id) {
    HashMap<String, Integer> m = indexById;
    if (m == null) {
      m = new HashMap<>(all.size() * 2);
      for (int i = 0; i < all.size(); i++) {
        m.put(all.get(i).id(), i);
      }
      indexById = m;
    }
    Integer i = m.get(id);
    return i == null ? -1 : i;
  }

  /**
   * The fleet's view of the candidates for this request, read once per cycle (on its first use);
   * {@code null} without a fleet.
   */
  FleetView fleetView() {
    if (!fleetRead) {
      fleetRead = true;
      if (scheduler.fleet != null) {
        long[] keys = requestKeys();
        // the approximate hashes too when this scheduler keeps a routing memory: one read for both
        long[] hashes = scheduler.approximate != null ? approximateHashes() : FleetCycles.NO_KEYS;
        fleetView =
            scheduler.fleet.view(
                FleetCycles.ids(all),
                keys == null ? FleetCycles.NO_KEYS : keys,
                keys == null ? 0 : keys.length,
                hashes,
                hashes.length);
      }
    }
    return fleetView;
  }

  // ---- precise ----

  @Override
  public boolean hasPreciseMatches() {
    return scheduler.lookup != null && tokens != null && request.preciseScoring();
  }

  long[] requestKeys() {
    if (requestKeys == null && hasPreciseMatches()) {
      requestKeys =
          scheduler.lookup.requestKeys(
              tokens, request.lora().orElse(null), request.cacheSalt().orElse(null));
    }
    return requestKeys;
  }

  private void computePrecise() {
    int n = all.size();
    preciseMatched = new int[n];
    preciseWeighted = new double[n];
    long[] keys = requestKeys();
    if (keys == null || keys.length == 0) {
      return;
    }
    scheduler.lookup.lookup(keys, all, preciseMatched, preciseWeighted);
    if (scheduler.speculative != null && !scheduler.speculative.isEmpty()) {
      for (int c = 0; c < n; c++) {
        int from = preciseMatched[c];
        if (from < keys.length) {
          int to = scheduler.speculative.extend(all.get(c).id(), keys, from, now);
          preciseWeighted[c] += to - from;
          preciseMatched[c] = to;
        }
      }
    }
    FleetView fv = fleetView();
    if (fv != null) {
      // what another replica (or this one) just sent there, before its KV events arrive
      for (int c = 0; c < n; c++) {
        int s = Math.min(keys.length, fv.speculativeBlocks(c));
        if (s > preciseMatched[c]) {
          preciseWeighted[c] += s - preciseMatched[c];
          preciseMatched[c] = s;
        }
      }
    }
  }

  /** Tier-weighted matched blocks of candidate {@code i} (precise), or 0. */
  double preciseWeightedAt(int i) {
    if (!hasPreciseMatches()) {
      return 0;
    }
    if (preciseMatched == null) {
      computePrecise();
    }
    return i < 0 ? 0 : preciseWeighted[i];
  }

  /** Tokens per block of the precise index. */
  int preciseBlockSize() {
    return scheduler.lookup.blockSizeTokens();
  }

  /** Blocks of the prompt (precise request keys), 0 without precise matches. */
  int preciseTotalBlocks() {
    long[] keys = requestKeys();
    return keys == null ? 0 : keys.length;
  }

  /** Matched blocks of candidate {@code i} of the request (precise), or 0. */
  int preciseMatchedAt(int i) {
    if (!hasPreciseMatches()) {
      return 0;
    }
    if (preciseMatched == null) {
      computePrecise();
    }
    return i < 0 ? 0 : preciseMatched[i];
  }

  @Override
  public PrefixCacheMatch preciseMatch(Endpoint endpoint) {
    if (!hasPreciseMatches()) {
      return PrefixCacheMatch.NONE;
    }
    if (preciseMatched == null) {
      computePrecise();
    }
    int i = indexOf(endpoint.id());
    long[] keys = requestKeys();
    int bs = scheduler.lookup.blockSizeTokens();
    if (i < 0) {
      return new PrefixCacheMatch(0, 0, keys.length, bs);
    }
    return new PrefixCacheMatch(preciseMatched[i], preciseWeighted[i], keys.length, bs);
  }

  // ---- approximate ----

  /**
   * The text the approximate index hashes when the request carries no token ids: the prompt, or the
   * conversation's roles and contents, each followed by a new line; null when there is none.
   */
  private String approximateText() {
    if (approxText == null) {
      Optional<String> p = request.prompt();
      if (p.isPresent()) {
        approxText = p.get();
      } else if (request.messages().isPresent()) {
        StringBuilder sb = new StringBuilder();
        for (SchedulingRequest.ChatMessage m : request.messages().get()) {
          sb.append(m.role()).append('\n').append(m.content()).append('\n');
        }
        approxText = sb.toString();
      }
    }
    return approxText;
  }

  /**
   * The length of the approximate tokens ({@link Hashing#estimateTokens} of {@link
   * #approximateText()}, or the request's token ids when it has no text); -1 when there are none.
   */
  private int approximateTokenCount() {
    String text = approximateText();
    if (text != null) {
      return Hashing.estimatedTokenCount(text);
    }
    return tokens == null ? -1 : tokens.length;
  }

  long[] approximateHashes() {
    if (approxHashes == null) {
      String text = approximateText();
      String model = request.cacheModelName();
      String salt = request.cacheSalt().orElse(null);
      if (text != null) {
        // the estimated tokens are hashed as they are encoded: no array of them per request
        approxHashes =
            Hashing.chainedBlocksOfText(
                text, scheduler.approxBlockSize, scheduler.approxMaxBlocks, model, salt);
      } else {
        approxHashes =
            tokens == null
                ? new long[0]
                : Hashing.chainedBlocks(
                    tokens, scheduler.approxBlockSize, scheduler.approxMaxBlocks, model, salt);
      }
    }
    return approxHashes;
  }

  int approximateMatchedAt(int i) {
    if (approxMatched == null) {
      approxMatched = new int[all.size()];
      if (scheduler.approximate != null) {
        long[] h = approximateHashes();
        scheduler.approximate.match(h, this::indexOf, approxMatched);
        FleetView fv = fleetView();
        if (fv != null) {
          // where another replica (or this one) sent the prompt: the fleet's routing memory
          for (int c = 0; c < approxMatched.length; c++) {
            approxMatched[c] =
                Math.max(approxMatched[c], Math.min(h.length, fv.rememberedBlocks(c)));
          }
        }
      }
    }
    return i < 0 ? 0 : approxMatched[i];
  }

  @Override
  public PrefixCacheMatch approximateMatch(Endpoint endpoint) {
    int m = approximateMatchedAt(indexOf(endpoint.id()));
    return new PrefixCacheMatch(m, m, approximateHashes().length, scheduler.approxBlockSize);
  }

  /** Matched blocks by the best available source, by candidate index. */
  int prefixMatchedAt(int i) {
    return hasPreciseMatches() ? preciseMatchedAt(i) : approximateMatchedAt(i);
  }

  // ---- load ----

  @Override
  public Optional<EndpointMetrics> metrics(Endpoint endpoint) {
    return Optional.ofNullable(scheduler.metrics.freshOrNull(endpoint.id(), now));
  }

  EndpointMetrics metricsOrNull(Endpoint endpoint) {
    return scheduler.metrics.freshOrNull(endpoint.id(), now);
  }

  /**
   * Fresh metrics of {@code e} (found at {@code hint} of the caller's list), or {@code null};
   * looked up once per request and candidate, however many scorers ask.
   */
  EndpointMetrics metricsAt(Endpoint e, int hint) {
    int i = slotOf(e, hint);
    if (i < 0) {
      return metricsOrNull(e);
    }
    if (metricsLooked == null) {
      metricsLooked = new boolean[all.size()];
      metricsCache = new EndpointMetrics[all.size()];
    }
    if (!metricsLooked[i]) {
      metricsCache[i] = metricsOrNull(all.get(i));
      metricsLooked[i] = true;
    }
    return metricsCache[i];
  }

  MetricsStore.Freshness freshness(Endpoint endpoint) {
    return scheduler.metrics.freshness(endpoint.id(), now);
  }

  @Override
  public int inFlight(Endpoint endpoint) {
    FleetView fv = fleetView();
    if (fv != null) {
      int i = indexOf(endpoint.id());
      if (i >= 0) {
        return (int) Math.min(Integer.MAX_VALUE, fv.inFlightRequests(i));
      }
    }
    return scheduler.inFlight.get(endpoint.id());
  }
}
