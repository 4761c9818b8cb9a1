package io.kvroute.kvindex.hash.internal;

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;

/**
 * Builds the exact byte pre-images vLLM hashes: canonical CBOR (cbor2 {@code canonical=True}) and
 * CPython pickle protocol 5 of the tuple {@code (parent, tuple(tokens), extra_keys)}.
 *
 * <p>Supported Python values, as Java objects: {@code null} (None), {@link String} (str), {@code
 * byte[]} (bytes), {@link Integer}/{@link Long}/{@link BigInteger} (int), {@link List} (tuple).
 *
 * <p>Not thread-safe: one instance per thread (it reuses its buffer).
 */
public final class Preimage {
  private static final int PICKLE_FRAME_TARGET = 64 * 1024;

  private byte[] buf = new byte[256];
  private int len;
  // pickle framing: start of the current frame's header, or -1 when not framing
  private int frameStart = -1;

  /** The encoded bytes; valid up to {@link #length()}. */
  public byte[] buffer() {
    return buf;
  }

  /** Number of valid bytes in {@link #buffer()}. */
  public int length() {
    return len;
  }

  /** A copy of the encoded bytes. */
  public byte[] toByteArray() {
    return Arrays.copyOf(buf, len);
  }

  // ---------------------------------------------------------------- CBOR

  /** Encodes {@code [parent bytes, [tokens...], extra]} as canonical CBOR. */
  public Preimage cborBlock(byte[] parent, int[] tokens, int from, int to, Object extra) {
    len = 0;
    cborHead(4, 3);
    cborHead(2, parent.length);
    put(parent, 0, parent.length);
    cborTokens(tokens, from, to);
    cborValue(extra);
    return this;
  }

  /** Encodes {@code [parent u64, [tokens...], extra]} (legacy 64-bit chain). */
  public Preimage cborBlockU64(long parent, int[] tokens, int from, int to, Object extra) {
    len = 0;
    cborHead(4, 3);
    cborHead(0, parent);
    cborTokens(tokens, from, to);
    cborValue(extra);
    return this;
  }

  /** Encodes a single value as canonical CBOR (used for {@code NONE_HASH}). */
  public Preimage cborSingle(Object value) {
    len = 0;
    cborValue(value);
    return this;
  }

  private void cborTokens(int[] tokens, int from, int to) {
    cborHead(4, to - from);
    for (int i = from; i < to; i++) {
      int t = tokens[i];
      if (t >= 0) {
        cborHead(0, t);
      } else {
        cborHead(1, -1L - t);
      }
    }
  }

  private void cborValue(Object v) {
    if (v == null) {
      put(0xf6);
    } else if (v instanceof String) {
      byte[] b = ((String) v).getBytes(StandardCharsets.UTF_8);
      cborHead(3, b.length);
      put(b, 0, b.length);
    } else if (v instanceof byte[]) {
      byte[] b = (byte[]) v;
      cborHead(2, b.length);
      put(b, 0, b.length);
    } else if (v instanceof Integer || v instanceof Long) {
      long x = ((Number) v).longValue();
      if (x >= 0) {
        cborHead(0, x);
      } else {
        cborHead(1, -1L - x);
      }
    } else if (v instanceof BigInteger) {
      BigInteger x = (BigInteger) v;
      if (x.signum() >= 0 && x.bitLength() <= 64) {
        cborHead(0, x.longValue());
      } else if (x.signum() < 0 && x.negate().subtract(BigInteger.ONE).bitLength() <= 64) {
        cborHead(1, x.negate().subtract(BigInteger.ONE).longValue());
      } else {
        throw new IllegalArgumentException("integer out of 64-bit CBOR range: " + x);
      }
    } else if (v instanceof List) {
      List<?> l = (List<?>) v;
      cborHead(4, l.size());
      for (Object o : l) {
        cborValue(o);
      }
    } else {
      throw new IllegalArgumentException(
          "unsupported extra-key value type "
              + v.getClass().getName()
              + " (use null, String, byte[], Integer, Long, BigInteger or List)");
    }
  }

  /** Major type {@code major} with argument {@code n} (unsigned), shortest form. */
  private void cborHead(int major, long n) {
    int m = major << 5;
    if (n >= 0 && n < 24) {
      put(m | (int) n);
    } else if (n >= 0 && n <= 0xFF) {
      put(m | 24);
      put((int) n);
    } else if (n >= 0 && n <= 0xFFFF) {
      put(m | 25);
      put((int) (n >>> 8));
      put((int) n);
    } else if (n >= 0 && n <= 0xFFFFFFFFL) {
      put(m | 26);
      for (int s = 24; s >= 0; s -= 8) {
        put((int) (n >>> s));
      }
    } else {
      put(m | 27);
      for (int s = 56; s >= 0; s -= 8) {
        put((int) (n >>> s));
      }
    }
  }

  // ---------------------------------------------------------------- pickle protocol 5

  /** Encodes {@code (parent, tuple(tokens), extra)} as CPython pickle protocol 5. */
  public Preimage pickleBlock(byte[] parent, int[] tokens, int from, int to, Object extra) {
    pickleStart();
    pickleBytes(parent);
    boundary();
    put(0x28); // MARK
    for (int i = from; i < to; i++) {
      pickleInt(tokens[i]);
      boundary();
    }
    if (to == from) {
      len--; // no MARK for an empty tuple
      put(0x29);
    } else {
      put(0x74); // TUPLE
      put(0x94);
    }
    boundary();
    pickleValue(extra);
    boundary();
    put(0x87); // TUPLE3
    put(0x94);
    return pickleEnd();
  }

  /** Encodes a single value as pickle protocol 5 (used for {@code NONE_HASH}). */
  public Preimage pickleSingle(Object value) {
    pickleStart();
    pickleValue(value);
    return pickleEnd();
  }

  private void pickleStart() {
    len = 0;
    put(0x80);
    put(5);
    frameStart = len;
    reserveFrameHeader();
  }

  private Preimage pickleEnd() {
    put(0x2e); // STOP
    commitFrame(true);
    frameStart = -1;
    return this;
  }

  /** Opcode boundary: start a new frame once the current one reaches the 64 KiB target. */
  private void boundary() {
    if (len - frameStart - 9 >= PICKLE_FRAME_TARGET) {
      commitFrame(false);
      frameStart = len;
      reserveFrameHeader();
    }
  }

  private void commitFrame(boolean last) {
    int payload = len - frameStart - 9;
    if (payload >= 4) {
      buf[frameStart] = (byte) 0x95;
      for (int i = 0; i < 8; i++) {
        buf[frameStart + 1 + i] = (byte) ((long) payload >>> (8 * i));
      }
    } else {
      // frames shorter than 4 bytes are written without a FRAME header
      System.arraycopy(buf, frameStart + 9, buf, frameStart, payload);
      len -= 9;
    }
  }

  private void pickleValue(Object v) {
    if (v == null) {
      put(0x4e);
    } else if (v instanceof String) {
      byte[] b = ((String) v).getBytes(StandardCharsets.UTF_8);
      if (b.length < 256) {
        put(0x8c);
        put(b.length);
      } else {
        put(0x58);
        putLe32(b.length);
      }
      put(b, 0, b.length);
      put(0x94);
    } else if (v instanceof byte[]) {
      pickleBytes((byte[]) v);
    } else if (v instanceof Integer || v instanceof Long) {
      pickleLong(((Number) v).longValue());
    } else if (v instanceof BigInteger) {
      BigInteger x = (BigInteger) v;
      if (x.bitLength() < 64) {
        pickleLong(x.longValue());
      } else {
        pickleLong1(x);
      }
    } else if (v instanceof List) {
      List<?> l = (List<?>) v;
      int n = l.size();
      if (n == 0) {
        put(0x29); // EMPTY_TUPLE, not memoized
        return;
      }
      if (n > 3) {
        put(0x28);
      }
      for (Object o : l) {
        pickleValue(o);
        boundary();
      }
      put(n == 1 ? 0x85 : n == 2 ? 0x86 : n == 3 ? 0x87 : 0x74);
      put(0x94);
    } else {
      throw new IllegalArgumentException(
          "unsupported extra-key value type "
              + v.getClass().getName()
              + " (use null, String, byte[], Integer, Long, BigInteger or List)");
    }
  }

  private void pickleBytes(byte[] b) {
    if (b.length < 256) {
      put(0x43);
      put(b.length);
    } else {
      put(0x42);
      putLe32(b.length);
    }
    put(b, 0, b.length);
    put(0x94);
  }

  private void pickleInt(int t) {
    if (t >= 0 && t <= 0xFF) {
      put(0x4b);
      put(t);
    } else if (t >= 0 && t <= 0xFFFF) {
      put(0x4d);
      put(t);
      put(t >>> 8);
    } else {
      put(0x4a);
      putLe32(t);
    }
  }

  private void pickleLong(long x) {
    if (x >= Integer.MIN_VALUE && x <= Integer.MAX_VALUE) {
      pickleInt((int) x);
    } else {
      pickleLong1(BigInteger.valueOf(x));
    }
  }

  /** LONG1: minimal little-endian two's complement. */
  private void pickleLong1(BigInteger x) {
    byte[] be = x.toByteArray(); // minimal big-endian two's complement
    if (be.length > 255) {
      throw new IllegalArgumentException("integer too large for pickle LONG1: " + x);
    }
    put(0x8a);
    put(be.length);
    for (int i = be.length - 1; i >= 0; i--) {
      put(be[i]);
    }
  }

  // ---------------------------------------------------------------- buffer

  private void reserveFrameHeader() {
    for (int i = 0; i < 9; i++) {
      put(0);
    }
  }

  private void put(int b) {
    if (len == buf.length) {
      buf = Arrays.copyOf(buf, buf.length * 2);
    }
    buf[len++] = (byte) b;
  }

  private void putLe32(int v) {
    put(v);
    put(v >>> 8);
    put(v >>> 16);
    put(v >>> 24);
  }

  private void put(byte[] b, int off, int n) {
    if (len + n > buf.length) {
      buf = Arrays.copyOf(buf, Math.max(buf.length * 2, len + n));
    }
    System.arraycopy(b, off, buf, len, n);
    len += n;
  }
}
