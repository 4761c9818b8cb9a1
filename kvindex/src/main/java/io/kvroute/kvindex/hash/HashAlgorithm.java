package io.kvroute.kvindex.hash;

import java.util.Arrays;
import java.util.Locale;
import java.util.stream.Collectors;

/**
 * vLLM prefix-cache hash algorithms ({@code --prefix-caching-hash-algo}), plus the legacy 64-bit
 * CBOR chain of vLLM v0.10.0-v0.10.1.
 */
public enum HashAlgorithm {
  /** SHA-256 over a pickle protocol 5 pre-image; vLLM's default since v0.10.2. 32-byte digest. */
  SHA256("sha256", 32),
  /** SHA-256 over a canonical CBOR pre-image. 32-byte digest. */
  SHA256_CBOR("sha256_cbor", 32),
  /**
   * Legacy (v0.10.0-v0.10.1): the low 64 bits of SHA-256 over canonical CBOR, chained as an
   * integer. Its "digest" here is the 8-byte big-endian form of that integer.
   */
  SHA256_CBOR_64BIT("sha256_cbor_64bit", 8),
  /** XXH3-128 over a pickle protocol 5 pre-image. 16-byte digest. */
  XXHASH("xxhash", 16),
  /** XXH3-128 over a canonical CBOR pre-image. 16-byte digest. */
  XXHASH_CBOR("xxhash_cbor", 16);

  private final String vllmName;
  private final int digestLength;

  HashAlgorithm(String vllmName, int digestLength) {
    this.vllmName = vllmName;
    this.digestLength = digestLength;
  }

  /** The name vLLM uses ({@code sha256}, {@code sha256_cbor}, ...). */
  public String vllmName() {
    return vllmName;
  }

  /** Digest length in bytes. */
  public int digestLength() {
    return digestLength;
  }

  /** Whether the pre-image is canonical CBOR (otherwise pickle protocol 5). */
  public boolean usesCbor() {
    return this == SHA256_CBOR || this == SHA256_CBOR_64BIT || this == XXHASH_CBOR;
  }

  /**
   * Parses a vLLM algorithm name (case-insensitive).
   *
   * @throws IllegalArgumentException naming the known algorithms if {@code name} is unknown
   */
  public static HashAlgorithm fromVllmName(String name) {
    if (name != null) {
      String n = name.trim().toLowerCase(Locale.ROOT);
      for (HashAlgorithm a : values()) {
        if (a.vllmName.equals(n)) {
          return a;
        }
      }
    }
    throw new IllegalArgumentException(
        "unknown hash algorithm \""
            + name
            + "\"; known: "
            + Arrays.stream(values())
                .map(HashAlgorithm::vllmName)
                .collect(Collectors.joining(", ")));
  }
}
