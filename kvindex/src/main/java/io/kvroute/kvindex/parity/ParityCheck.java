package io.kvroute.kvindex.parity;

import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.hash.BlockExtraKeys;
import io.kvroute.kvindex.hash.BlockHash;
import io.kvroute.kvindex.hash.HashAlgorithm;
import io.kvroute.kvindex.hash.VllmBlockHasher;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * Decides whether kvroute and a vLLM engine agree on a prompt's prefix-cache blocks, and when they
 * do not, why: the pure core of the router's parity check and of {@code kvroute doctor}.
 *
 * <p>Two uses:
 *
 * <ul>
 *   <li>{@link #expectedHashes(int[], BlockExtraKeys)}: the block hashes (event form) the engine
 *       will publish for a prompt if it hashes as {@link #configured()} says; a router compares
 *       them with the {@code BlockStored} events that follow the request.
 *   <li>{@link #diagnose(ParityEvidence)}: when they are not published, the cause, in this order:
 *       the events' {@code block_size} differs from the configured one; the engine hashes with
 *       another algorithm or {@code PYTHONHASHSEED} (each candidate of {@link
 *       Builder#candidateSeeds} × every {@link HashAlgorithm} is tried, first on the events' own
 *       tokens, then on the engine's token ids, then on kvroute's, and the one that reproduces a
 *       published hash is named); the engine's token ids for the prompt differ from kvroute's
 *       (given the engine's ids from {@code /tokenize}, a render endpoint or an event, or inferred
 *       when the engine's hashing is understood yet none of the prompt's blocks was published).
 * </ul>
 *
 * <pre>{@code
 * ParityCheck check = ParityCheck.of(HashSettings.of(HashAlgorithm.SHA256_CBOR, 16, "0"));
 * ParityDiagnosis d = check.diagnose(ParityEvidence.builder()
 *     .promptTokens(tokens)
 *     .engineTokens(tokensFromTokenize, "/tokenize")
 *     .storedEvent(blockStored)           // every BlockStored seen after the request
 *     .build());
 * if (!d.matches()) log.warn("{}: {} (fix: {})", d.cause(), d.message(), d.fix());
 * }</pre>
 *
 * <p>Pure and CPU-bound: a diagnosis hashes at most {@link Builder#maxBlocks(int)} blocks per
 * candidate (vLLM-exact SHA-256, about 100 ns a block) and stops at the first candidate that
 * reproduces a published hash; run it off the request path. Immutable and thread-safe.
 */
public final class ParityCheck {
  /** The {@code PYTHONHASHSEED} values tried besides the configured one and "unset". */
  public static final List<String> DEFAULT_CANDIDATE_SEEDS = List.of("0", "42", "1", "");

  /** Blocks hashed per candidate by default. */
  public static final int DEFAULT_MAX_BLOCKS = 64;

  /** Root events hashed per candidate at most. */
  private static final int MAX_SELF_CHECK_EVENTS = 16;

  private static final String TOKENS_FIX =
      "make kvroute's token ids the engine's: the same tokenizer files and chat template as the"
          + " engine (the engine's --chat-template, or models.<name>.tokenizer.chatTemplate in"
          + " kvroute), the same special tokens (a BOS added twice by template and tokenizer is a"
          + " common cause), and the request's template options (tools, chat_template_kwargs);"
          + " or let kvroute tokenize with the engine's own /tokenize or render endpoints";

  private final HashSettings configured;
  private final List<String> candidateSeeds;
  private final int maxBlocks;

  private ParityCheck(Builder b) {
    this.configured = b.configured;
    this.candidateSeeds = List.copyOf(b.candidateSeeds);
    this.maxBlocks = b.maxBlocks;
  }

  /** A check of {@code configured} with the default candidates. */
  public static ParityCheck of(HashSettings configured) {
    return builder(configured).build();
  }

  /** A builder for {@code configured} (what kvroute expects the engine to use). */
  public static Builder builder(HashSettings configured) {
    return new Builder(configured);
  }

  /** The settings kvroute expects the engine to use. */
  public HashSettings configured() {
    return configured;
  }

  /** The {@code PYTHONHASHSEED} values tried besides the configured one and "unset". */
  public List<String> candidateSeeds() {
    return candidateSeeds;
  }

  /**
   * The block hashes, in event form (vLLM's {@code maybe_convert_block_hash}: unsigned 64-bit in
   * long bits), that the engine publishes for every full block of {@code tokens} if it hashes as
   * configured.
   *
   * @throws IllegalStateException when the configured settings are not {@link
   *     HashSettings#reproducible()}
   */
  public long[] expectedHashes(int[] tokens, BlockExtraKeys extras) {
    Objects.requireNonNull(tokens, "tokens");
    Objects.requireNonNull(extras, "extras");
    return chain(configured.hasher(), tokens, extras, Integer.MAX_VALUE);
  }

  /** Diagnoses one prompt against what one engine published. */
  public ParityDiagnosis diagnose(ParityEvidence evidence) {
    Objects.requireNonNull(evidence, "evidence");
    List<ParityDiagnosis.Finding> findings = new ArrayList<>();
    Set<Long> observed = evidence.observedHashes();
    BlockExtraKeys extras = evidence.extraKeys();

    Integer engineBlockSize = engineBlockSize(evidence.observedBlockSizes());
    int size = engineBlockSize == null ? configured.blockSize() : engineBlockSize;
    if (size != configured.blockSize()) {
      findings.add(
          new ParityDiagnosis.Finding(
              ParityDiagnosis.Cause.BLOCK_SIZE,
              "the engine's KV events carry block_size "
                  + size
                  + " but kvroute is configured with "
                  + configured.blockSize(),
              "configure kvroute's block size as the engine's --block-size ("
                  + size
                  + "; index.blockSize in the gateway configuration, IndexConfig.blockSize in"
                  + " code), or start vLLM with --block-size "
                  + configured.blockSize()));
    }
    if (!configured.reproducible()) {
      findings.add(
          new ParityDiagnosis.Finding(
              ParityDiagnosis.Cause.HASH_SEED,
              "kvroute is configured with "
                  + configured.algorithm().vllmName()
                  + " and PYTHONHASHSEED unset: vLLM draws that NONE_HASH at random per process,"
                  + " so no one can predict the engine's block hashes",
              "start the engine with PYTHONHASHSEED set (for example PYTHONHASHSEED=0) and"
                  + " configure kvroute with the same seed"));
    }

    int[] prompt = evidence.promptTokensUnsafe();
    long[] predicted =
        prompt != null && configured.reproducible()
            ? chain(configured.hasher(), prompt, extras, Integer.MAX_VALUE)
            : new long[0];
    int matched = count(predicted, observed);

    if (observed.isEmpty()) {
      findings.add(
          new ParityDiagnosis.Finding(
              ParityDiagnosis.Cause.NO_EVIDENCE,
              "the engine published no block hashes to compare with (no BlockStored event"
                  + " observed)",
              "check that the engine runs with prefix caching and --kv-events-config"
                  + " '{\"enable_kv_cache_events\": true, \"publisher\": \"zmq\"}', and that"
                  + " kvroute subscribes to its publisher (endpoint and topic)"));
      return result(findings, predicted.length, matched, engineBlockSize, null, -1, "");
    }
    int[] engineTokens = evidence.engineTokensUnsafe();
    if (findings.isEmpty()
        && predicted.length > 0
        && matched == predicted.length
        && (engineTokens == null || Arrays.equals(engineTokens, prompt))) {
      return result(
          findings,
          predicted.length,
          matched,
          engineBlockSize,
          configured,
          -1,
          "all "
              + predicted.length
              + " predicted block hash(es) were published by the engine ("
              + configured.describe()
              + ")");
    }

    Identified engine = identify(evidence, size);
    HashSettings engineSettings = engine == null ? null : engine.settings;
    if (engineSettings != null) {
      hashFinding(engineSettings, engine.how).ifPresent(findings::add);
    }

    int mismatch = -1;
    if (engineTokens != null && prompt != null) {
      mismatch = firstMismatch(prompt, engineTokens);
      if (mismatch >= 0) {
        findings.add(
            new ParityDiagnosis.Finding(
                ParityDiagnosis.Cause.TOKENS,
                "kvroute's token ids for the prompt differ from "
                    + evidence.engineTokensSource()
                    + "'s "
                    + describeMismatch(prompt, engineTokens, mismatch),
                TOKENS_FIX));
      }
    } else if (prompt != null
        && engineSettings != null
        && !engine.how.equals(HOW_PROMPT)
        && engineSettings.reproducible()) {
      long[] again = chain(engineSettings.hasher(), prompt, extras, maxBlocks);
      if (again.length > 0 && count(again, observed) == 0) {
        findings.add(
            new ParityDiagnosis.Finding(
                ParityDiagnosis.Cause.TOKENS,
                "none of the prompt's "
                    + again.length
                    + " block(s) is among the engine's published hashes although the engine's"
                    + " own "
                    + engine.how
                    + " hash as "
                    + engineSettings.describe()
                    + ": the engine's token ids for the prompt differ from kvroute's"
                    + closestEvent(evidence, prompt),
                TOKENS_FIX));
      }
    }

    if (findings.isEmpty()) {
      if (prompt == null) {
        return result(
            findings,
            0,
            0,
            engineBlockSize,
            engineSettings,
            -1,
            engineSettings == null
                ? "nothing to compare"
                : "the engine's events hash as configured (" + engineSettings.describe() + ")");
      }
      if (predicted.length == 0) {
        findings.add(
            new ParityDiagnosis.Finding(
                ParityDiagnosis.Cause.NO_EVIDENCE,
                "the prompt has "
                    + prompt.length
                    + " token(s), fewer than one block of "
                    + configured.blockSize(),
                "diagnose with a prompt of at least " + configured.blockSize() + " tokens"));
      } else if (matched > 0) {
        findings.add(
            new ParityDiagnosis.Finding(
                ParityDiagnosis.Cause.PARTIAL,
                matched
                    + " of the prompt's "
                    + predicted.length
                    + " predicted block hash(es) were published by the engine, the others not"
                    + " (yet)",
                "none if the engine held those blocks already or evicted them; if it persists,"
                    + " compare kvroute's token ids with the engine's (kvroute doctor): a"
                    + " difference after token "
                    + matched * configured.blockSize()
                    + " (for example the generation prompt of the chat template) looks like"
                    + " this"));
      } else {
        findings.add(
            new ParityDiagnosis.Finding(
                ParityDiagnosis.Cause.UNEXPLAINED,
                "none of the prompt's "
                    + predicted.length
                    + " predicted block hash(es) is among the "
                    + observed.size()
                    + " the engine published, and no algorithm with PYTHONHASHSEED in "
                    + seedList()
                    + " reproduces them",
                "run kvroute doctor against the engine; the usual causes are token ids that"
                    + " differ (chat template, special tokens), a PYTHONHASHSEED other than those"
                    + " tried, xxhash without PYTHONHASHSEED (random per process), LoRA,"
                    + " cache_salt or multimodal inputs kvroute was not told about, or events"
                    + " that did not reach kvroute"));
      }
    }
    return result(
        findings, predicted.length, matched, engineBlockSize, engineSettings, mismatch, "");
  }

  private ParityDiagnosis result(
      List<ParityDiagnosis.Finding> findings,
      int predicted,
      int matched,
      Integer engineBlockSize,
      HashSettings engine,
      int mismatch,
      String matchMessage) {
    ParityDiagnosis.Cause cause =
        findings.isEmpty() ? ParityDiagnosis.Cause.MATCH : findings.get(0).cause();
    return new ParityDiagnosis(
        configured,
        matchMessage,
        cause,
        findings,
        predicted,
        matched,
        engineBlockSize,
        engine,
        mismatch);
  }

  // ---------------------------------------------------------------- the engine's hashing

  private static final String HOW_EVENTS = "KV events (their own token_ids)";
  private static final String HOW_ENGINE_TOKENS = "token ids";
  private static final String HOW_PROMPT = "prompt";

  private record Identified(HashSettings settings, String how) {}

  /**
   * The first candidate (most likely first) reproducing at least one published hash: on the root
   * events' own tokens, then on the engine's token ids, then on kvroute's. A match of a 64-bit
   * chained hash is conclusive (a false one has probability 2^-64).
   */
  private Identified identify(ParityEvidence ev, int size) {
    List<KvEvent.BlockStored> roots = new ArrayList<>();
    for (KvEvent.BlockStored e : ev.storedEvents()) {
      if (!e.hasParent()
          && e.blockSize() > 0
          && e.blockHashes().size() > 0
          && e.tokenIds().length == e.blockHashes().size() * e.blockSize()) {
        roots.add(e);
        if (roots.size() == MAX_SELF_CHECK_EVENTS) {
          break;
        }
      }
    }
    List<HashSettings> candidates = candidates(size);
    if (!roots.isEmpty()) {
      for (HashSettings c : candidates) {
        for (KvEvent.BlockStored e : roots) {
          if (selfMatches(e, c.withBlockSize(e.blockSize())) > 0) {
            return new Identified(c.withBlockSize(size), HOW_EVENTS);
          }
        }
      }
    }
    Set<Long> observed = ev.observedHashes();
    int[][] sources = {ev.engineTokensUnsafe(), ev.promptTokensUnsafe()};
    String[] how = {HOW_ENGINE_TOKENS, HOW_PROMPT};
    for (int s = 0; s < sources.length; s++) {
      if (sources[s] == null || sources[s].length < size) {
        continue;
      }
      for (HashSettings c : candidates) {
        if (count(chain(c.hasher(), sources[s], ev.extraKeys(), maxBlocks), observed) > 0) {
          return new Identified(c, how[s]);
        }
      }
    }
    return null;
  }

  /** The candidates at {@code size}: the configured algorithm and seed first. */
  private List<HashSettings> candidates(int size) {
    Set<String> seeds = new LinkedHashSet<>();
    seeds.add(configured.pythonHashSeed().orElse(null));
    seeds.add(null);
    seeds.addAll(candidateSeeds);
    List<HashAlgorithm> algorithms = new ArrayList<>();
    algorithms.add(configured.algorithm());
    for (HashAlgorithm a : HashAlgorithm.values()) {
      if (a != configured.algorithm()) {
        algorithms.add(a);
      }
    }
    Set<HashSettings> out = new LinkedHashSet<>();
    HashSettings base = configured.withBlockSize(size);
    for (String seed : seeds) {
      out.add(base.withPythonHashSeed(seed));
    }
    String configuredSeed = configured.pythonHashSeed().orElse(null);
    for (HashAlgorithm a : algorithms) {
      out.add(base.withAlgorithm(a).withPythonHashSeed(configuredSeed));
    }
    for (HashAlgorithm a : algorithms) {
      for (String seed : seeds) {
        out.add(base.withAlgorithm(a).withPythonHashSeed(seed));
      }
    }
    List<HashSettings> list = new ArrayList<>();
    for (HashSettings h : out) {
      if (h.reproducible()) {
        list.add(h);
      }
    }
    return list;
  }

  /** How many of a root event's blocks {@code c} reproduces from the event's own tokens. */
  private int selfMatches(KvEvent.BlockStored e, HashSettings c) {
    VllmBlockHasher h = c.hasher();
    int bs = e.blockSize();
    int n = Math.min(e.blockHashes().size(), maxBlocks);
    int[] tokens = e.tokenIds();
    List<Object> extra = e.extraKeys();
    String lora = e.loraName();
    byte[] parent = null;
    int matches = 0;
    try {
      for (int i = 0; i < n; i++) {
        List<?> keys;
        if (extra != null) {
          Object k = i < extra.size() ? extra.get(i) : null;
          keys = k instanceof List<?> l ? l : null;
        } else {
          keys = lora == null ? null : List.of(lora);
        }
        BlockHash b = h.hashBlock(parent, tokens, i * bs, (i + 1) * bs, keys);
        if (b.u64() == e.blockHashes().get(i)) {
          matches++;
        }
        parent = b.digest();
      }
    } catch (IllegalArgumentException unsupportedExtraKey) {
      return 0; // an extra-key value vLLM's hashing never produces: not this event
    }
    return matches;
  }

  private java.util.Optional<ParityDiagnosis.Finding> hashFinding(HashSettings engine, String how) {
    boolean algorithm = engine.algorithm() != configured.algorithm();
    boolean seed = !noneHashSeed(engine).equals(noneHashSeed(configured));
    if (!algorithm && !seed) {
      return java.util.Optional.empty();
    }
    ParityDiagnosis.Cause cause =
        algorithm && seed
            ? ParityDiagnosis.Cause.HASH_ALGORITHM_AND_SEED
            : algorithm ? ParityDiagnosis.Cause.HASH_ALGORITHM : ParityDiagnosis.Cause.HASH_SEED;
    String message =
        "no published hash matches "
            + configured.algorithm().vllmName()
            + " with "
            + configured.describeSeed()
            + ", but the engine's "
            + how
            + " hash as "
            + engine.algorithm().vllmName()
            + " with "
            + engine.describeSeed();
    String fix =
        "configure kvroute with the engine's hashing (hash algorithm "
            + engine.algorithm().vllmName()
            + ", "
            + engine.describeSeed()
            + "), or start the engine as kvroute expects: "
            + configured.withBlockSize(engine.blockSize()).vllmCommandLine();
    return java.util.Optional.of(new ParityDiagnosis.Finding(cause, message, fix));
  }

  /**
   * The string {@code NONE_HASH} is derived from ("unset" is vLLM's default seed where defined).
   */
  private static String noneHashSeed(HashSettings s) {
    return s.pythonHashSeed().orElse(VllmBlockHasher.DEFAULT_NONE_HASH_SEED);
  }

  private String seedList() {
    Set<String> seeds = new LinkedHashSet<>();
    seeds.add(configured.pythonHashSeed().map(s -> "\"" + s + "\"").orElse("unset"));
    seeds.add("unset");
    for (String s : candidateSeeds) {
      seeds.add("\"" + s + "\"");
    }
    return "{" + String.join(", ", seeds) + "}";
  }

  // ---------------------------------------------------------------- helpers

  private static Integer engineBlockSize(Map<Integer, Integer> sizes) {
    Integer best = null;
    int most = 0;
    for (Map.Entry<Integer, Integer> e : sizes.entrySet()) {
      if (e.getValue() > most) {
        best = e.getKey();
        most = e.getValue();
      }
    }
    return best;
  }

  private static long[] chain(
      VllmBlockHasher h, int[] tokens, BlockExtraKeys extras, int maxBlocks) {
    int n = Math.min(tokens.length / h.blockSize(), maxBlocks);
    int[] t =
        n * h.blockSize() == tokens.length ? tokens : Arrays.copyOf(tokens, n * h.blockSize());
    List<BlockHash> hashes = h.hashBlocks(t, extras);
    long[] out = new long[hashes.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = hashes.get(i).u64();
    }
    return out;
  }

  private static int count(long[] hashes, Set<Long> observed) {
    int n = 0;
    for (long h : hashes) {
      if (observed.contains(h)) {
        n++;
      }
    }
    return n;
  }

  /** The first index where {@code a} and {@code b} differ, the shorter length, or -1. */
  private static int firstMismatch(int[] a, int[] b) {
    return Arrays.mismatch(a, b);
  }

  private static String describeMismatch(int[] kv, int[] engine, int i) {
    StringBuilder sb =
        new StringBuilder("from token ")
            .append(i)
            .append(" (kvroute has ")
            .append(kv.length)
            .append(" tokens, the engine ")
            .append(engine.length);
    if (i < kv.length && i < engine.length) {
      sb.append("; at ").append(i).append(" kvroute has ").append(kv[i]);
      sb.append(", the engine ").append(engine[i]);
    } else {
      int[] longer = kv.length > engine.length ? kv : engine;
      sb.append("; ")
          .append(longer == kv ? "kvroute" : "the engine")
          .append(" has ")
          .append(longer.length - i)
          .append(" more at the end");
    }
    return sb.append(')').toString();
  }

  /** Where the prompt leaves the root event that shares the most tokens with it. */
  private static String closestEvent(ParityEvidence ev, int[] prompt) {
    int best = -1;
    int length = 0;
    for (KvEvent.BlockStored e : ev.storedEvents()) {
      if (e.hasParent() || e.tokenIds().length == 0) {
        continue;
      }
      int m = Arrays.mismatch(prompt, e.tokenIds());
      int common = m < 0 ? prompt.length : m;
      if (common > best) {
        best = common;
        length = e.tokenIds().length;
      }
    }
    if (best < 0) {
      return "";
    }
    return " (the closest stored span shares its first "
        + best
        + " token(s) with the prompt, of "
        + length
        + ")";
  }

  @Override
  public String toString() {
    return "ParityCheck{" + configured.describe() + "}";
  }

  /** Builder of {@link ParityCheck}; not thread-safe. */
  public static final class Builder {
    private final HashSettings configured;
    private List<String> candidateSeeds = DEFAULT_CANDIDATE_SEEDS;
    private int maxBlocks = DEFAULT_MAX_BLOCKS;

    private Builder(HashSettings configured) {
      this.configured = Objects.requireNonNull(configured, "configured");
    }

    /**
     * The {@code PYTHONHASHSEED} values tried, besides the configured one and "unset", to name the
     * engine's seed (default {@link ParityCheck#DEFAULT_CANDIDATE_SEEDS}).
     */
    public Builder candidateSeeds(List<String> seeds) {
      for (String s : seeds) {
        Objects.requireNonNull(s, "candidateSeeds must not hold null (\"unset\" is always tried)");
      }
      this.candidateSeeds = List.copyOf(seeds);
      return this;
    }

    /**
     * Blocks hashed per candidate while searching (default {@value
     * ParityCheck#DEFAULT_MAX_BLOCKS}).
     */
    public Builder maxBlocks(int maxBlocks) {
      this.maxBlocks = maxBlocks;
      return this;
    }

    /**
     * Builds the check.
     *
     * @throws IllegalArgumentException if {@code maxBlocks} is not positive
     */
    public ParityCheck build() {
      if (maxBlocks <= 0) {
        throw new IllegalArgumentException("parity.maxBlocks must be > 0, was " + maxBlocks);
      }
      return new ParityCheck(this);
    }
  }
}
