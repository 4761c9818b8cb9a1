package io.kvroute.kvindex.parity;

import io.kvroute.kvindex.hash.HashAlgorithm;
import io.kvroute.kvindex.hash.VllmBlockHasher;
import java.util.Objects;
import java.util.Optional;

/**
 * How a vLLM engine hashes its prefix-cache blocks: the block size ({@code --block-size}), the
 * algorithm ({@code --prefix-caching-hash-algo}) and the {@code PYTHONHASHSEED} its {@code
 * NONE_HASH} is derived from (unset in a default deployment). Both what kvroute is configured to
 * expect and what an engine is found to use are described with it.
 *
 * <p>Immutable and thread-safe.
 */
public final class HashSettings {
  private final HashAlgorithm algorithm;
  private final int blockSize;
  private final String pythonHashSeed;

  private HashSettings(HashAlgorithm algorithm, int blockSize, String pythonHashSeed) {
    this.algorithm = algorithm;
    this.blockSize = blockSize;
    this.pythonHashSeed = pythonHashSeed;
  }

  /**
   * Settings.
   *
   * @param algorithm vLLM's {@code --prefix-caching-hash-algo}
   * @param blockSize tokens per block, vLLM's {@code --block-size} (&gt; 0)
   * @param pythonHashSeed the engine's {@code PYTHONHASHSEED}, or {@code null} when it is unset
   * @throws IllegalArgumentException if the block size is not positive
   */
  public static HashSettings of(HashAlgorithm algorithm, int blockSize, String pythonHashSeed) {
    Objects.requireNonNull(algorithm, "algorithm");
    if (blockSize <= 0) {
      throw new IllegalArgumentException("blockSize must be > 0, was " + blockSize);
    }
    return new HashSettings(algorithm, blockSize, pythonHashSeed);
  }

  /** What a vLLM started without options uses: {@code sha256}, block size 16, no seed. */
  public static HashSettings vllmDefaults() {
    return new HashSettings(HashAlgorithm.SHA256, 16, null);
  }

  /** The algorithm. */
  public HashAlgorithm algorithm() {
    return algorithm;
  }

  /** Tokens per block. */
  public int blockSize() {
    return blockSize;
  }

  /** The {@code PYTHONHASHSEED} value; empty when it is unset. */
  public Optional<String> pythonHashSeed() {
    return Optional.ofNullable(pythonHashSeed);
  }

  /** These settings with another algorithm. */
  public HashSettings withAlgorithm(HashAlgorithm algorithm) {
    return of(algorithm, blockSize, pythonHashSeed);
  }

  /** These settings with another block size. */
  public HashSettings withBlockSize(int blockSize) {
    return of(algorithm, blockSize, pythonHashSeed);
  }

  /** These settings with another {@code PYTHONHASHSEED} ({@code null}: unset). */
  public HashSettings withPythonHashSeed(String pythonHashSeed) {
    return new HashSettings(algorithm, blockSize, pythonHashSeed);
  }

  /**
   * Whether another process can reproduce the engine's hashes: false for {@code xxhash}, {@code
   * xxhash_cbor} and the legacy {@code sha256_cbor_64bit} without a {@code PYTHONHASHSEED}, whose
   * {@code NONE_HASH} vLLM draws at random per process.
   */
  public boolean reproducible() {
    return pythonHashSeed != null
        || algorithm == HashAlgorithm.SHA256
        || algorithm == HashAlgorithm.SHA256_CBOR;
  }

  /**
   * A hasher computing exactly the engine's hashes.
   *
   * @throws IllegalStateException when the settings are not {@link #reproducible()}
   */
  public VllmBlockHasher hasher() {
    if (!reproducible()) {
      throw new IllegalStateException(
          describe()
              + ": vLLM draws this NONE_HASH at random per process, so no router can reproduce the"
              + " engine's block hashes; start the engine with PYTHONHASHSEED set (for example"
              + " PYTHONHASHSEED=0) and configure the same seed in kvroute");
    }
    return VllmBlockHasher.builder()
        .algorithm(algorithm)
        .blockSize(blockSize)
        .hashSeed(pythonHashSeed)
        .build();
  }

  /** The seed as a person reads it: {@code PYTHONHASHSEED=0} or {@code PYTHONHASHSEED unset}. */
  public String describeSeed() {
    return pythonHashSeed == null
        ? "PYTHONHASHSEED unset"
        : "PYTHONHASHSEED=" + (pythonHashSeed.isEmpty() ? "\"\"" : pythonHashSeed);
  }

  /** For example {@code sha256_cbor, block size 16, PYTHONHASHSEED=0}. */
  public String describe() {
    return algorithm.vllmName() + ", block size " + blockSize + ", " + describeSeed();
  }

  /**
   * How to start vLLM with these settings, for example {@code PYTHONHASHSEED=0 vllm serve ...
   * --block-size 16 --prefix-caching-hash-algo sha256_cbor}.
   */
  public String vllmCommandLine() {
    return (pythonHashSeed == null
            ? "vllm serve ... (PYTHONHASHSEED unset)"
            : "PYTHONHASHSEED="
                + (pythonHashSeed.isEmpty() ? "''" : pythonHashSeed)
                + " vllm serve ...")
        + " --block-size "
        + blockSize
        + " --prefix-caching-hash-algo "
        + algorithm.vllmName();
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof HashSettings h
        && h.algorithm == algorithm
        && h.blockSize == blockSize
        && Objects.equals(h.pythonHashSeed, pythonHashSeed);
  }

  @Override
  public int hashCode() {
    return Objects.hash(algorithm, blockSize, pythonHashSeed);
  }

  @Override
  public String toString() {
    return "HashSettings{" + describe() + "}";
  }
}
