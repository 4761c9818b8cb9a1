package io.kvroute.kvindex.hash;

import java.util.Arrays;
import java.util.HexFormat;

/**
 * The hash of one full block as vLLM computes it: the raw digest bytes (what chains into the next
 * block) and the integer form vLLM publishes in KV events (the last 8 digest bytes read as an
 * unsigned big-endian integer, held in the bits of a {@code long}).
 *
 * <p>Immutable and thread-safe.
 */
public final class BlockHash {
  private final byte[] digest;
  private final long u64;

  private BlockHash(byte[] digest) {
    this.digest = digest;
    this.u64 = eventForm(digest);
  }

  /** Wraps a copy of {@code digest} (any length; shorter than 8 bytes is left-padded). */
  public static BlockHash of(byte[] digest) {
    return new BlockHash(digest.clone());
  }

  static BlockHash wrap(byte[] digest) {
    return new BlockHash(digest);
  }

  /**
   * vLLM's {@code maybe_convert_block_hash}: the last 8 bytes of {@code digest}, big-endian,
   * unsigned, in the bits of a long (use {@link Long#toUnsignedString(long)} to print it).
   */
  public static long eventForm(byte[] digest) {
    long v = 0;
    for (int i = Math.max(0, digest.length - 8); i < digest.length; i++) {
      v = (v << 8) | (digest[i] & 0xFF);
    }
    return v;
  }

  byte[] digestUnsafe() {
    return digest;
  }

  /** A copy of the digest bytes. */
  public byte[] digest() {
    return digest.clone();
  }

  /** Digest length in bytes. */
  public int digestLength() {
    return digest.length;
  }

  /** The event integer form (u64 in long bits). */
  public long u64() {
    return u64;
  }

  /** The event integer form as an unsigned decimal string. */
  public String u64String() {
    return Long.toUnsignedString(u64);
  }

  /** The digest in lower-case hex. */
  public String hex() {
    return HexFormat.of().formatHex(digest);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof BlockHash && Arrays.equals(digest, ((BlockHash) o).digest);
  }

  @Override
  public int hashCode() {
    return Long.hashCode(u64);
  }

  @Override
  public String toString() {
    return "BlockHash{" + hex() + ", u64=" + u64String() + "}";
  }
}
