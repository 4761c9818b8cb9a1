package io.kvroute.kvindex;

import io.micrometer.core.instrument.MeterRegistry;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * Immutable configuration of an in-memory {@link BlockIndex}, built by a validating {@link
 * Builder}.
 *
 * <table>
 *   <caption>Options</caption>
 *   <tr><th>option</th><th>default</th><th>meaning</th></tr>
 *   <tr><td>blockSize</td><td>16</td><td>tokens per request key; engine block sizes must be a
 *       whole multiple or divisor of it</td></tr>
 *   <tr><td>hashSeed</td><td>""</td><td>seed of the request-key chain (need only match across index
 *       replicas, not vLLM)</td></tr>
 *   <tr><td>modelName</td><td>""</td><td>base model name, the root of non-LoRA chains</td></tr>
 *   <tr><td>maxKeys</td><td>10,000,000</td><td>request keys kept; beyond, approximate LRU
 *       eviction</td></tr>
 *   <tr><td>maxPodsPerKey</td><td>256</td><td>entries (pod × tier × group) per key; beyond, the
 *       oldest entry of that key is dropped</td></tr>
 *   <tr><td>maxEngineKeys</td><td>maxKeys</td><td>engine-key → request-key mappings kept
 *       (approximate LRU)</td></tr>
 *   <tr><td>maxPods</td><td>16,384</td><td>distinct pods; events of further pods are dropped and
 *       counted</td></tr>
 *   <tr><td>tierWeights</td><td>GPU 1.0, CPU 0.8</td><td>score weight per medium (upper-cased);
 *       no weight may exceed GPU's</td></tr>
 *   <tr><td>defaultTierWeight</td><td>0.5</td><td>weight of media not listed (e.g. STORAGE, DISK)
 *       </td></tr>
 *   <tr><td>meterRegistry</td><td>none</td><td>Micrometer registry for the {@code kvroute_kvindex_*}
 *       meters</td></tr>
 * </table>
 */
public final class IndexConfig {
  /** Name of the GPU tier (the default medium). */
  public static final String GPU = "GPU";

  private final int blockSize;
  private final String hashSeed;
  private final String modelName;
  private final int maxKeys;
  private final int maxPodsPerKey;
  private final int maxEngineKeys;
  private final int maxPods;
  private final Map<String, Double> tierWeights;
  private final double defaultTierWeight;
  private final MeterRegistry meterRegistry;

  private IndexConfig(Builder b) {
    this.blockSize = b.blockSize;
    this.hashSeed = b.hashSeed;
    this.modelName = b.modelName;
    this.maxKeys = b.maxKeys;
    this.maxPodsPerKey = b.maxPodsPerKey;
    this.maxEngineKeys = b.maxEngineKeys > 0 ? b.maxEngineKeys : b.maxKeys;
    this.maxPods = b.maxPods;
    this.tierWeights = Collections.unmodifiableMap(new LinkedHashMap<>(b.tierWeights));
    this.defaultTierWeight = b.defaultTierWeight;
    this.meterRegistry = b.meterRegistry;
  }

  /** A builder with the defaults above. */
  public static Builder builder() {
    return new Builder();
  }

  /** The defaults. */
  public static IndexConfig defaults() {
    return builder().build();
  }

  /** Tokens per request-key block. */
  public int blockSize() {
    return blockSize;
  }

  /** Seed of the request-key chain. */
  public String hashSeed() {
    return hashSeed;
  }

  /** Base model name. */
  public String modelName() {
    return modelName;
  }

  /** Maximum request keys. */
  public int maxKeys() {
    return maxKeys;
  }

  /** Maximum entries per request key. */
  public int maxPodsPerKey() {
    return maxPodsPerKey;
  }

  /** Maximum engine-key mappings. */
  public int maxEngineKeys() {
    return maxEngineKeys;
  }

  /** Maximum distinct pods. */
  public int maxPods() {
    return maxPods;
  }

  /** Configured tier weights, GPU first, names upper-cased. */
  public Map<String, Double> tierWeights() {
    return tierWeights;
  }

  /** Weight of a medium (upper-cased lookup; {@code null} means GPU). */
  public double tierWeight(String medium) {
    String m = medium == null ? GPU : medium.toUpperCase(Locale.ROOT);
    return tierWeights.getOrDefault(m, defaultTierWeight);
  }

  /** Weight of unlisted media. */
  public double defaultTierWeight() {
    return defaultTierWeight;
  }

  /** The Micrometer registry, if any. */
  public Optional<MeterRegistry> meterRegistry() {
    return Optional.ofNullable(meterRegistry);
  }

  @Override
  public String toString() {
    return "IndexConfig{blockSize="
        + blockSize
        + ", modelName="
        + modelName
        + ", maxKeys="
        + maxKeys
        + ", maxPodsPerKey="
        + maxPodsPerKey
        + ", maxEngineKeys="
        + maxEngineKeys
        + ", maxPods="
        + maxPods
        + ", tierWeights="
        + tierWeights
        + ", defaultTierWeight="
        + defaultTierWeight
        + "}";
  }

  /** Validating builder of {@link IndexConfig}; not thread-safe. */
  public static final class Builder {
    private int blockSize = 16;
    private String hashSeed = "";
    private String modelName = "";
    private int maxKeys = 10_000_000;
    private int maxPodsPerKey = 256;
    private int maxEngineKeys;
    private int maxPods = 16_384;
    private final Map<String, Double> tierWeights = new LinkedHashMap<>();
    private double defaultTierWeight = 0.5;
    private MeterRegistry meterRegistry;

    private Builder() {
      tierWeights.put(GPU, 1.0);
      tierWeights.put("CPU", 0.8);
    }

    /** Tokens per request-key block (default 16). */
    public Builder blockSize(int blockSize) {
      this.blockSize = blockSize;
      return this;
    }

    /** Seed of the request-key chain (default ""). */
    public Builder hashSeed(String hashSeed) {
      this.hashSeed = Objects.requireNonNull(hashSeed, "hashSeed");
      return this;
    }

    /** Base model name (default ""): the root of chains without a LoRA adapter. */
    public Builder modelName(String modelName) {
      this.modelName = Objects.requireNonNull(modelName, "modelName");
      return this;
    }

    /** Maximum request keys (default 10,000,000). */
    public Builder maxKeys(int maxKeys) {
      this.maxKeys = maxKeys;
      return this;
    }

    /** Maximum entries (pod × tier × group) per key (default 256). */
    public Builder maxPodsPerKey(int maxPodsPerKey) {
      this.maxPodsPerKey = maxPodsPerKey;
      return this;
    }

    /** Maximum engine-key mappings (default: maxKeys). */
    public Builder maxEngineKeys(int maxEngineKeys) {
      this.maxEngineKeys = maxEngineKeys;
      return this;
    }

    /** Maximum distinct pods (default 16,384; at most 524,287). */
    public Builder maxPods(int maxPods) {
      this.maxPods = maxPods;
      return this;
    }

    /** Sets one medium's weight (name upper-cased), e.g. {@code tierWeight("CPU", 0.8)}. */
    public Builder tierWeight(String medium, double weight) {
      tierWeights.put(Objects.requireNonNull(medium, "medium").toUpperCase(Locale.ROOT), weight);
      return this;
    }

    /** Weight of media without an explicit weight (default 0.5). */
    public Builder defaultTierWeight(double weight) {
      this.defaultTierWeight = weight;
      return this;
    }

    /** Registers the {@code kvroute_kvindex_*} meters in {@code registry}. */
    public Builder meterRegistry(MeterRegistry registry) {
      this.meterRegistry = registry;
      return this;
    }

    /**
     * Builds the configuration.
     *
     * @throws IllegalArgumentException naming the first invalid field
     */
    public IndexConfig build() {
      check(blockSize > 0, "index.blockSize must be > 0, was " + blockSize);
      check(maxKeys > 0, "index.maxKeys must be > 0, was " + maxKeys);
      check(maxKeys <= (1 << 29), "index.maxKeys must be <= " + (1 << 29) + ", was " + maxKeys);
      check(maxPodsPerKey > 0, "index.maxPodsPerKey must be > 0, was " + maxPodsPerKey);
      check(
          maxEngineKeys >= 0 && maxEngineKeys <= (1 << 29),
          "index.maxEngineKeys must be in [1, " + (1 << 29) + "], was " + maxEngineKeys);
      check(
          maxPods > 0 && maxPods <= 524_287,
          "index.maxPods must be in [1, 524287], was " + maxPods);
      double gpu = tierWeights.get(GPU);
      for (Map.Entry<String, Double> e : tierWeights.entrySet()) {
        double w = e.getValue();
        check(
            w >= 0 && !Double.isNaN(w) && !Double.isInfinite(w),
            "index.tierWeights[" + e.getKey() + "] must be finite and >= 0, was " + w);
        check(
            w <= gpu,
            "index.tierWeights["
                + e.getKey()
                + "] must be <= the GPU weight "
                + gpu
                + ", was "
                + w);
      }
      check(tierWeights.size() <= 15, "index.tierWeights must list at most 15 media");
      check(
          defaultTierWeight >= 0 && defaultTierWeight <= gpu,
          "index.defaultTierWeight must be in [0, GPU weight "
              + gpu
              + "], was "
              + defaultTierWeight);
      return new IndexConfig(this);
    }

    private static void check(boolean ok, String message) {
      if (!ok) {
        throw new IllegalArgumentException(message);
      }
    }
  }
}
