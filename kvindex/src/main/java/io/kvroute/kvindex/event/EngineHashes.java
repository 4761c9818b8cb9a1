package io.kvroute.kvindex.event;

import java.util.Arrays;
import java.util.Objects;

/**
 * The block hashes of one event as vLLM sends them ({@code ExternalBlockHash = bytes | int}),
 * normalised to unsigned 64-bit values carried in {@code long} bits.
 *
 * <p>Normalisation (spec §1.7, the same as llm-d's {@code getHashAsUint64} and vLLM's int mode): an
 * integer's 64 bits are taken as they are (a negative signed int64 and a uint64 ≥ 2^63 share bits);
 * a {@code bin} value gives its <em>last</em> 8 bytes read big-endian, shorter values left-padded
 * with zeros. Raw bytes are kept so the event can be re-encoded byte for byte.
 *
 * <p>Immutable by contract: the arrays returned by {@link #values()} and held for raw bytes are
 * shared, not copied (to keep ingestion allocation-free); callers must not modify them. Thread-safe
 * once published.
 */
public final class EngineHashes {

  private static final EngineHashes EMPTY = new EngineHashes(new long[0], null, false);

  private final long[] values;
  private final byte[][] raw;
  private final boolean signed;

  private EngineHashes(long[] values, byte[][] raw, boolean signed) {
    this.values = values;
    this.raw = raw;
    this.signed = signed;
  }

  /** No hashes. */
  public static EngineHashes empty() {
    return EMPTY;
  }

  /**
   * Integer hashes. With {@code signed} false (vLLM) each value is an unsigned 64-bit integer and
   * encodes as msgpack {@code uint64} when ≥ 2^63; with {@code signed} true (SGLang, pre-0.10.2
   * vLLM {@code hash()}) negative values encode as signed ints.
   *
   * @param values u64 bits; shared, not copied
   * @param signed whether values are signed 64-bit integers on the wire
   */
  public static EngineHashes ofInts(long[] values, boolean signed) {
    return new EngineHashes(Objects.requireNonNull(values, "values"), null, signed);
  }

  /** Unsigned integer hashes (vLLM's default int mode). */
  public static EngineHashes ofInts(long... values) {
    return ofInts(values, false);
  }

  /**
   * Byte hashes (vLLM with {@code VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0}): each value's u64 is its
   * last 8 bytes, big-endian.
   */
  public static EngineHashes ofBytes(byte[]... raw) {
    Objects.requireNonNull(raw, "raw");
    long[] values = new long[raw.length];
    for (int i = 0; i < raw.length; i++) {
      values[i] = u64OfBytes(Objects.requireNonNull(raw[i], "raw[" + i + "]"));
    }
    return new EngineHashes(values, raw.length == 0 ? null : raw, false);
  }

  /**
   * Internal factory used by the decoder: {@code raw} may be {@code null} (all ints) or hold {@code
   * null} entries for integer values.
   */
  static EngineHashes of(long[] values, byte[][] raw, boolean signed) {
    return new EngineHashes(values, raw, signed);
  }

  /** The u64 of a bin hash: its last 8 bytes big-endian, left-padded when shorter. */
  public static long u64OfBytes(byte[] b) {
    long v = 0;
    for (int i = Math.max(0, b.length - 8); i < b.length; i++) {
      v = (v << 8) | (b[i] & 0xffL);
    }
    return v;
  }

  /** Number of hashes. */
  public int size() {
    return values.length;
  }

  /** The {@code i}-th hash as u64 bits. */
  public long get(int i) {
    return values[i];
  }

  /** All hashes as u64 bits; the shared backing array (do not modify). */
  public long[] values() {
    return values;
  }

  /** Raw bytes of the {@code i}-th hash, or {@code null} if it was sent as an integer. */
  public byte[] raw(int i) {
    return raw == null ? null : raw[i];
  }

  /** Whether any hash was sent as bytes. */
  public boolean hasRaw() {
    return raw != null;
  }

  /** Whether integer hashes are signed on the wire (negative values encode as signed ints). */
  public boolean signed() {
    return signed;
  }

  /** The {@code i}-th hash as an unsigned decimal string. */
  public String toUnsignedString(int i) {
    return Long.toUnsignedString(values[i]);
  }

  /** Equal values and raw bytes (the wire signedness of integers is not compared). */
  @Override
  public boolean equals(Object o) {
    if (!(o instanceof EngineHashes)) {
      return false;
    }
    EngineHashes h = (EngineHashes) o;
    return Arrays.equals(values, h.values) && Arrays.deepEquals(raw, h.raw);
  }

  @Override
  public int hashCode() {
    return Arrays.hashCode(values);
  }

  @Override
  public String toString() {
    StringBuilder sb = new StringBuilder("[");
    for (int i = 0; i < values.length; i++) {
      if (i > 0) {
        sb.append(", ");
      }
      sb.append(Long.toUnsignedString(values[i]));
    }
    return sb.append(']').toString();
  }
}
