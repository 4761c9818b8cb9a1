package io.kvroute.kvindex.hash;

import io.kvroute.kvindex.hash.internal.Preimage;
import io.kvroute.kvindex.hash.internal.Xxh3;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * Computes vLLM's prefix-cache block hashes exactly as vLLM does ({@code hash_block_tokens} and
 * {@code get_request_block_hasher}): each full block hashes the 3-tuple {@code (parent digest,
 * tuple(tokens), extra_keys or None)}, the first block's parent being {@code NONE_HASH =
 * hash_fn(PYTHONHASHSEED string)}. A trailing partial block is never hashed.
 *
 * <p><b>{@code NONE_HASH}.</b> vLLM derives it from {@code PYTHONHASHSEED} when that is set ({@link
 * Builder#hashSeed(String)}). When it is unset, current vLLM ({@code resolve_none_hash_seed} in
 * {@code vllm/v1/core/kv_cache_utils.py}, vLLM PR #51875, merged 2026-08-11) uses the fixed seed
 * {@value #DEFAULT_NONE_HASH_SEED} for the cryptographic algorithms ({@code sha256}, {@code
 * sha256_cbor}) and a random seed per process for {@code xxhash}/{@code xxhash_cbor}. This hasher
 * does the same: without a seed, {@code SHA256} and {@code SHA256_CBOR} use {@link
 * #DEFAULT_NONE_HASH_SEED}; {@code XXHASH}, {@code XXHASH_CBOR} and the legacy {@code
 * SHA256_CBOR_64BIT} (whose vLLM releases always used {@code os.urandom}) need a seed or an
 * explicit {@link Builder#noneHash(byte[])}. (Read from the upstream file as stored after that PR;
 * the source index did not expose that copy's commit id. Older releases, e.g. {@code
 * kv_cache_utils.py@001cabc1}, used a random {@code NONE_HASH} for every algorithm when {@code
 * PYTHONHASHSEED} was unset: pass {@link Builder#noneHash(byte[])} for those.)
 *
 * <pre>{@code
 * VllmBlockHasher hasher = VllmBlockHasher.builder()
 *     .algorithm(HashAlgorithm.SHA256).blockSize(16).build(); // vLLM's defaults
 * List<BlockHash> hashes = hasher.hashBlocks(tokens, BlockExtraKeys.lora("my-lora"));
 * long eventHash = hashes.get(0).u64();  // what vLLM publishes in BlockStored
 * }</pre>
 *
 * <p>vLLM-exact SHA-256 costs about 100 ns per block: use it for ingestion checks and simulation,
 * not on a router's request path (the index uses its own fast request keys).
 *
 * <p>Immutable and thread-safe (per-thread scratch buffers).
 */
public final class VllmBlockHasher {
  /**
   * The seed current vLLM derives {@code NONE_HASH} from when {@code PYTHONHASHSEED} is unset and
   * the algorithm is {@code sha256} or {@code sha256_cbor}: vLLM's {@code DEFAULT_NONE_HASH_SEED}.
   */
  public static final String DEFAULT_NONE_HASH_SEED = "vllm-none-hash";

  private final HashAlgorithm algorithm;
  private final int blockSize;
  private final byte[] noneHash;
  private final ThreadLocal<Scratch> scratch = ThreadLocal.withInitial(Scratch::new);

  private VllmBlockHasher(Builder b) {
    this.algorithm = b.algorithm;
    this.blockSize = b.blockSize;
    this.noneHash =
        b.noneHash != null
            ? b.noneHash.clone()
            : noneHash(b.algorithm, b.hashSeed != null ? b.hashSeed : DEFAULT_NONE_HASH_SEED);
  }

  /**
   * A builder: algorithm {@code SHA256}, block size 16, and vLLM's default {@code NONE_HASH} seed
   * ({@link #DEFAULT_NONE_HASH_SEED}) for the algorithms that have one.
   */
  public static Builder builder() {
    return new Builder();
  }

  /** The algorithm. */
  public HashAlgorithm algorithm() {
    return algorithm;
  }

  /** Tokens per block. */
  public int blockSize() {
    return blockSize;
  }

  /** A copy of {@code NONE_HASH}, the parent of the first block. */
  public byte[] noneHash() {
    return noneHash.clone();
  }

  /**
   * vLLM's {@code NONE_HASH} for a {@code PYTHONHASHSEED} value: the algorithm applied to the seed
   * as a Python {@code str} ({@code ""} and {@code "random"} are hashed literally).
   */
  public static byte[] noneHash(HashAlgorithm algorithm, String pythonHashSeed) {
    Objects.requireNonNull(algorithm, "algorithm");
    Objects.requireNonNull(pythonHashSeed, "pythonHashSeed");
    Preimage p = new Preimage();
    if (algorithm.usesCbor()) {
      p.cborSingle(pythonHashSeed);
    } else {
      p.pickleSingle(pythonHashSeed);
    }
    return digest(algorithm, p, new Scratch());
  }

  /** Hashes every full block of {@code tokens} without extra keys. */
  public List<BlockHash> hashBlocks(int[] tokens) {
    return hashBlocks(tokens, BlockExtraKeys.NONE);
  }

  /**
   * Hashes every full block of {@code tokens}, in order; a trailing partial block is ignored.
   *
   * @param extras request-level extra keys ({@link BlockExtraKeys#NONE} for none)
   */
  public List<BlockHash> hashBlocks(int[] tokens, BlockExtraKeys extras) {
    Objects.requireNonNull(tokens, "tokens");
    Objects.requireNonNull(extras, "extras");
    int n = tokens.length / blockSize;
    List<BlockHash> out = new ArrayList<>(n);
    byte[] parent = noneHash;
    for (int i = 0; i < n; i++) {
      int from = i * blockSize;
      int to = from + blockSize;
      BlockHash h = hashBlock(parent, tokens, from, to, extras.forBlock(from, to));
      out.add(h);
      parent = h.digestUnsafe();
    }
    return out;
  }

  /**
   * Hashes one block: vLLM's {@code hash_block_tokens(hash_fn, parent, tokens[from:to],
   * extraKeys)}. Any token count is accepted (vLLM's request hasher only passes full blocks).
   *
   * @param parentDigest the parent block's digest; {@code null} or empty means {@code NONE_HASH}
   *     (for {@link HashAlgorithm#SHA256_CBOR_64BIT}, the 8-byte big-endian parent integer)
   * @param extraKeys the extra-keys tuple, or {@code null} for {@code None} (an empty list is the
   *     empty tuple, which hashes differently); elements: {@code String}, {@code byte[]}, {@code
   *     Integer}/{@code Long}/{@code BigInteger}, nested {@code List}
   */
  public BlockHash hashBlock(
      byte[] parentDigest, int[] tokens, int from, int to, List<?> extraKeys) {
    Objects.requireNonNull(tokens, "tokens");
    Objects.checkFromToIndex(from, to, tokens.length);
    byte[] parent = parentDigest == null || parentDigest.length == 0 ? noneHash : parentDigest;
    Scratch s = scratch.get();
    Preimage p = s.preimage;
    switch (algorithm) {
      case SHA256_CBOR_64BIT:
        p.cborBlockU64(BlockHash.eventForm(parent), tokens, from, to, extraKeys);
        break;
      case SHA256_CBOR:
      case XXHASH_CBOR:
        p.cborBlock(parent, tokens, from, to, extraKeys);
        break;
      default:
        p.pickleBlock(parent, tokens, from, to, extraKeys);
    }
    return BlockHash.wrap(digest(algorithm, p, s));
  }

  /** The exact pre-image bytes of one block (for debugging and tests). */
  public byte[] preimage(byte[] parentDigest, int[] tokens, int from, int to, List<?> extraKeys) {
    byte[] parent = parentDigest == null || parentDigest.length == 0 ? noneHash : parentDigest;
    Preimage p = new Preimage();
    switch (algorithm) {
      case SHA256_CBOR_64BIT:
        return p.cborBlockU64(BlockHash.eventForm(parent), tokens, from, to, extraKeys)
            .toByteArray();
      case SHA256_CBOR:
      case XXHASH_CBOR:
        return p.cborBlock(parent, tokens, from, to, extraKeys).toByteArray();
      default:
        return p.pickleBlock(parent, tokens, from, to, extraKeys).toByteArray();
    }
  }

  private static byte[] digest(HashAlgorithm algorithm, Preimage p, Scratch s) {
    switch (algorithm) {
      case XXHASH:
      case XXHASH_CBOR:
        return Xxh3.digest128(p.buffer(), p.length());
      case SHA256_CBOR_64BIT:
        {
          byte[] full = s.sha256(p);
          return Arrays.copyOfRange(full, 24, 32);
        }
      default:
        return s.sha256(p);
    }
  }

  @Override
  public String toString() {
    return "VllmBlockHasher{" + algorithm.vllmName() + ", blockSize=" + blockSize + "}";
  }

  private static final class Scratch {
    final Preimage preimage = new Preimage();
    final MessageDigest sha;

    Scratch() {
      try {
        sha = MessageDigest.getInstance("SHA-256");
      } catch (NoSuchAlgorithmException e) {
        throw new IllegalStateException("SHA-256 unavailable", e);
      }
    }

    byte[] sha256(Preimage p) {
      sha.update(p.buffer(), 0, p.length());
      return sha.digest();
    }
  }

  /** Validating builder of {@link VllmBlockHasher}; not thread-safe. */
  public static final class Builder {
    private HashAlgorithm algorithm = HashAlgorithm.SHA256;
    private int blockSize = 16;
    private String hashSeed;
    private byte[] noneHash;

    private Builder() {}

    /** The algorithm (default {@link HashAlgorithm#SHA256}, vLLM's default). */
    public Builder algorithm(HashAlgorithm algorithm) {
      this.algorithm = Objects.requireNonNull(algorithm, "algorithm");
      return this;
    }

    /** Tokens per block (default 16). */
    public Builder blockSize(int blockSize) {
      this.blockSize = blockSize;
      return this;
    }

    /**
     * vLLM's {@code PYTHONHASHSEED} value, e.g. {@code "0"}; it wins over the default seed. {@code
     * null} (the default) means unset, as in a default vLLM deployment.
     */
    public Builder hashSeed(String pythonHashSeed) {
      this.hashSeed = pythonHashSeed;
      return this;
    }

    /**
     * An explicit {@code NONE_HASH} (e.g. one observed from a vLLM started without {@code
     * PYTHONHASHSEED}); overrides {@link #hashSeed(String)}.
     */
    public Builder noneHash(byte[] noneHash) {
      this.noneHash = noneHash == null ? null : noneHash.clone();
      return this;
    }

    /**
     * Builds the hasher.
     *
     * @throws IllegalArgumentException if the block size is not positive; if the algorithm has no
     *     default seed in vLLM ({@code xxhash}, {@code xxhash_cbor}, legacy {@code
     *     sha256_cbor_64bit}) and neither a hash seed nor a none hash is set; or if the none hash
     *     has the wrong length
     */
    public VllmBlockHasher build() {
      if (blockSize <= 0) {
        throw new IllegalArgumentException("blockSize must be > 0, was " + blockSize);
      }
      if (hashSeed == null
          && noneHash == null
          && algorithm != HashAlgorithm.SHA256
          && algorithm != HashAlgorithm.SHA256_CBOR) {
        throw new IllegalArgumentException(
            "hashSeed must be set for "
                + algorithm.vllmName()
                + " (vLLM's PYTHONHASHSEED, e.g. \"0\"), or noneHash(...) given: without"
                + " PYTHONHASHSEED vLLM seeds "
                + algorithm.vllmName()
                + "'s NONE_HASH randomly per process (only sha256 and sha256_cbor default to \""
                + DEFAULT_NONE_HASH_SEED
                + "\"), so no router can reproduce its block hashes; match them through the"
                + " index's engine-key mapping instead");
      }
      if (noneHash != null && noneHash.length != algorithm.digestLength()) {
        throw new IllegalArgumentException(
            "noneHash must be "
                + algorithm.digestLength()
                + " bytes for "
                + algorithm.vllmName()
                + ", was "
                + noneHash.length);
      }
      return new VllmBlockHasher(this);
    }
  }
}
