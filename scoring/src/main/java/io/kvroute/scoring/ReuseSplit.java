package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import java.util.EnumSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;

/**
 * The reuse split of a routed request (or the sum over requests): how many prompt tokens some
 * eligible engine held in its prefix cache (<em>available</em>), how many the chosen engine held
 * (<em>captured</em>), and how many that engine reported it reused (<em>delivered</em>: vLLM's
 * {@code usage.prompt_tokens_details.cached_tokens}; for a disaggregated request, the prefill
 * engine's). A miss has one or more causes ({@link Miss}): the routing chose another engine than
 * the best one ({@code captured < available}: load won over the cache), the engine no longer held
 * what the router believed ({@code delivered < captured}: a stale index, or an eviction while
 * queued), or no engine held anything.
 *
 * <p>Tokens are counted as vLLM counts cached tokens: whole blocks, and never the prompt's last
 * token (the engine recomputes it), so a prompt of {@code n} tokens in blocks of {@code b} can
 * reuse at most {@code (n - 1) / b * b} ({@link #reusableTokens}). The router ({@code
 * kvroute.routing.reuse.*}) and the replay ({@code kvroute replay}) both report this type: the
 * router from its index's view when it decided ({@link #of(Decision, Endpoint)}), the replay from
 * the simulated engines' true state.
 *
 * <p>Immutable value.
 *
 * @param promptTokens the prompt's tokens (summed over requests for a total)
 * @param available the longest reusable prefix any eligible endpoint held, in tokens
 * @param captured the reusable prefix the chosen endpoint held, in tokens (at most {@code
 *     available})
 * @param delivered the tokens the engine reported cached, or {@link #UNKNOWN} when it reported none
 *     (not yet, or never: a stream without usage, a request a gateway proxied itself)
 */
public record ReuseSplit(long promptTokens, long available, long captured, long delivered) {

  /** {@link #delivered()} when the engine has not reported its cached tokens. */
  public static final long UNKNOWN = -1;

  /** Nothing: no prompt, nothing held, nothing delivered. */
  public static final ReuseSplit ZERO = new ReuseSplit(0, 0, 0, 0);

  /** Why a request reused less than it could have. */
  public enum Miss {
    /**
     * The chosen endpoint held less than the best eligible one ({@code captured < available}): the
     * other scorers (load, queue, sessions) outweighed the cache.
     */
    LOAD,
    /**
     * The engine reused less than the router believed it held ({@code delivered < captured}): the
     * index was stale (an eviction not yet reported, a lagging event stream) or the blocks were
     * evicted while the request queued.
     */
    STALE_INDEX,
    /** No eligible endpoint held any of the prompt ({@code available == 0}). */
    NONE_AVAILABLE;

    /** The name used in meter tags and reports: {@code load}, {@code stale_index}, ... */
    public String tag() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  /**
   * Validates.
   *
   * @throws IllegalArgumentException when a count is negative, {@code captured > available}, or
   *     {@code delivered < -1}
   */
  public ReuseSplit {
    if (promptTokens < 0 || available < 0 || captured < 0) {
      throw new IllegalArgumentException(
          "reuse counts must be >= 0, were prompt "
              + promptTokens
              + ", available "
              + available
              + ", captured "
              + captured);
    }
    if (captured > available) {
      throw new IllegalArgumentException(
          "captured (" + captured + ") must not exceed available (" + available + ")");
    }
    if (delivered < UNKNOWN) {
      throw new IllegalArgumentException("delivered must be >= 0 or UNKNOWN, was " + delivered);
    }
  }

  /**
   * The split of a routed decision as the scheduler saw it, for the endpoint that computes the
   * prompt ({@code computing}: the prefill endpoint of a disaggregated request, else the decode
   * endpoint; a fallback's works too): <em>available</em> is the longest prefix any endpoint that
   * passed the filters of that endpoint's profile held, <em>captured</em> the prefix {@code
   * computing} held, both from {@link Decision#prefixMatch} (the precise index and its speculative
   * entries when the request had token ids, else the approximate index) and capped by {@link
   * #reusableTokens}. Without token ids the prompt's length is the approximate index's estimate.
   * {@link #delivered()} is {@link #UNKNOWN}. {@link #ZERO} for a decision that was not routed.
   */
  public static ReuseSplit of(Decision decision, Endpoint computing) {
    Objects.requireNonNull(decision, "decision");
    Objects.requireNonNull(computing, "computing");
    if (!decision.routed() || decision.context == null) {
      return ZERO;
    }
    long prompt = decision.promptTokens();
    if (prompt < 0) {
      synchronized (decision.context) {
        prompt = Math.max(0, decision.context.promptTokens());
      }
    }
    String profile =
        decision.disaggregated() && decision.prefillEndpoints().contains(computing)
            ? decision.prefillProfileName()
            : decision.primaryProfile();
    ProfileResult pr = decision.profiles().get(profile);
    List<Endpoint> eligible = pr == null ? List.of() : pr.candidates();
    long captured = reusableTokens(decision.prefixMatch(computing), prompt);
    long available = captured;
    for (Endpoint e : eligible) {
      if (!e.equals(computing)) {
        available = Math.max(available, reusableTokens(decision.prefixMatch(e), prompt));
      }
    }
    return new ReuseSplit(prompt, available, captured, UNKNOWN);
  }

  /**
   * The tokens of a prefix match an engine can reuse for a prompt of {@code promptTokens}: the
   * matched whole blocks, at most {@code (promptTokens - 1) / blockSize * blockSize} (vLLM never
   * reports the prompt's last token as cached; a trailing partial block is never reused).
   */
  public static long reusableTokens(PrefixCacheMatch match, long promptTokens) {
    Objects.requireNonNull(match, "match");
    return reusableTokens(match.cachedTokens(), match.blockSizeTokens(), promptTokens);
  }

  /**
   * {@code matchedTokens} capped at what a prompt of {@code promptTokens} in blocks of {@code
   * blockSize} can reuse: {@code (promptTokens - 1) / blockSize * blockSize} ({@code promptTokens -
   * 1} when the block size is unknown, 0).
   */
  public static long reusableTokens(long matchedTokens, int blockSize, long promptTokens) {
    if (promptTokens <= 1 || matchedTokens <= 0) {
      return 0;
    }
    long cap = blockSize > 0 ? (promptTokens - 1) / blockSize * blockSize : promptTokens - 1;
    return Math.min(matchedTokens, cap);
  }

  /** This split with what the engine reported cached ({@code cachedTokens} ≥ 0). */
  public ReuseSplit withDelivered(long cachedTokens) {
    if (cachedTokens < 0) {
      throw new IllegalArgumentException("cachedTokens must be >= 0, was " + cachedTokens);
    }
    return new ReuseSplit(promptTokens, available, captured, cachedTokens);
  }

  /**
   * This split measured by the engine's report: its prompt length ({@code usage.prompt_tokens})
   * replaces the router's count, {@code available} and {@code captured} are capped at what that
   * prompt can reuse ({@code promptTokens - 1}), and {@code delivered} is {@code cachedTokens}.
   */
  public ReuseSplit withUsage(long promptTokens, long cachedTokens) {
    if (promptTokens < 0 || cachedTokens < 0) {
      throw new IllegalArgumentException(
          "usage must be >= 0, was prompt " + promptTokens + ", cached " + cachedTokens);
    }
    long cap = Math.max(0, promptTokens - 1);
    return new ReuseSplit(
        promptTokens, Math.min(available, cap), Math.min(captured, cap), cachedTokens);
  }

  /** True when the engine reported its cached tokens ({@link #delivered()} is known). */
  public boolean measured() {
    return delivered != UNKNOWN;
  }

  /** Tokens lost to the routing: {@code available - captured}. */
  public long loadMissTokens() {
    return available - captured;
  }

  /**
   * Tokens the router believed the engine held that it did not reuse: {@code captured - delivered}
   * when positive and measured, else 0.
   */
  public long staleMissTokens() {
    return measured() ? Math.max(0, captured - delivered) : 0;
  }

  /**
   * The causes of this request's miss, in {@link Miss} order: {@link Miss#NONE_AVAILABLE} when
   * nothing was available; else {@link Miss#LOAD} when {@code captured < available} and {@link
   * Miss#STALE_INDEX} when measured and {@code delivered < captured} (both may hold). Empty for a
   * request that reused all that was available. Meaningful for one request, not for a sum.
   */
  public Set<Miss> misses() {
    if (available == 0) {
      return EnumSet.of(Miss.NONE_AVAILABLE);
    }
    EnumSet<Miss> m = EnumSet.noneOf(Miss.class);
    if (captured < available) {
      m.add(Miss.LOAD);
    }
    if (measured() && delivered < captured) {
      m.add(Miss.STALE_INDEX);
    }
    return m;
  }

  /**
   * The sum of this split and {@code other}, for totals over requests; an unknown delivery counts
   * as 0 (sum only measured requests for a meaningful {@code delivered}).
   */
  public ReuseSplit plus(ReuseSplit other) {
    Objects.requireNonNull(other, "other");
    return new ReuseSplit(
        promptTokens + other.promptTokens,
        available + other.available,
        captured + other.captured,
        Math.max(0, delivered) + Math.max(0, other.delivered));
  }

  /** {@code available / promptTokens}, 0 for no prompt. */
  public double availableRatio() {
    return ratio(available);
  }

  /** {@code captured / promptTokens}, 0 for no prompt. */
  public double capturedRatio() {
    return ratio(captured);
  }

  /** {@code delivered / promptTokens} (0 when unknown or no prompt). */
  public double deliveredRatio() {
    return ratio(Math.max(0, delivered));
  }

  private double ratio(long tokens) {
    return promptTokens == 0 ? 0 : (double) tokens / promptTokens;
  }
}
