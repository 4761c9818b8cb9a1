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
 * byte[]} (bytes), {@link Integer}/{@link Long}/{@link BigInteger} (int of any width), {@link List}
 * (tuple, nested to any depth). CBOR is cbor2's {@code canonical=True} output (shortest heads;
 * bignum tags 2/3 beyond 64 bits).
 *
 * <p><b>Pickle</b> follows CPython's C pickler ({@code Modules/_pickle.c}) at protocol 5 ({@code
 * pickle.HIGHEST_PROTOCOL} since CPython 3.8); every rule is checked against vectors produced by
 * CPython 3.11 ({@code pickle_value_shapes_seed0.json}, {@code hash_block_sizes_seed0.json}):
 *
 * <ul>
 *   <li>Framing: a {@code FRAME} (0x95, u64 little-endian length) opens at the first write; before
 *       each object is saved, a frame holding 64 KiB or more is committed and the next write opens
 *       a new one; a frame under 4 bytes is written without its header. A str or bytes payload of
 *       64 KiB or more commits the current frame and goes, with its opcode, outside any frame.
 *   <li>int (never memoized): {@code BININT1} 0..255, {@code BININT2} 256..65535, {@code BININT}
 *       other signed 32-bit values, else {@code LONG1} (minimal little-endian two's complement,
 *       under 256 bytes) or {@code LONG4}.
 *   <li>str: {@code SHORT_BINUNICODE} under 256 UTF-8 bytes, else {@code BINUNICODE} (UTF-8 with
 *       surrogatepass); bytes: {@code SHORT_BINBYTES} under 256, else {@code BINBYTES}; both are
 *       followed by {@code MEMOIZE}.
 *   <li>tuple: {@code ()} is {@code EMPTY_TUPLE} (not memoized); 1 to 3 items are the items then
 *       {@code TUPLE1/2/3}; longer tuples {@code MARK}, the items, {@code TUPLE}; then {@code
 *       MEMOIZE}. Token tuples follow the same rule (a block of 1 to 3 tokens uses {@code
 *       TUPLE1/2/3}).
 *   <li>The memo: a second occurrence of the same object is written as {@code BINGET}/{@code
 *       LONG_BINGET}. Equal values are the same object only where CPython keeps singletons ({@code
 *       ""}, one-character latin-1 str, {@code b""}, one-byte bytes); longer equal values are taken
 *       to be distinct objects, as vLLM's extra keys are.
 * </ul>
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
      } else if (x.signum() >= 0) {
        cborBignum(2, x); // cbor2: positive bignum, tag 2
      } else {
        cborBignum(3, x.negate().subtract(BigInteger.ONE)); // negative bignum, tag 3
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

  /** A bignum as cbor2 writes it: tag {@code tag}, then the minimal big-endian magnitude bytes. */
  private void cborBignum(int tag, BigInteger magnitude) {
    byte[] be = magnitude.toByteArray();
    int off = be[0] == 0 ? 1 : 0; // drop the sign byte
    cborHead(6, tag);
    cborHead(2, be.length - off);
    put(be, off, be.length - off);
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

  private static final int FRAME_HEADER = 9;
  private int memoCount;
  // memo index + 1 of singleton str (slot 0: "", 1 + c: one char c < 256) and bytes (likewise)
  private final int[] strMemo = new int[257];
  private final int[] bytesMemo = new int[257];
  private int[] memoTouched = new int[8];
  private int memoTouchedCount;

  /** Encodes {@code (parent, tuple(tokens), extra)} as CPython pickle protocol 5. */
  public Preimage pickleBlock(byte[] parent, int[] tokens, int from, int to, Object extra) {
    pickleStart();
    boundary(); // save(top-level tuple); three items: TUPLE3
    boundary();
    pickleBytes(parent);
    boundary();
    pickleTokens(tokens, from, to);
    pickleValue(extra);
    put(0x87); // TUPLE3
    memoize();
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
    for (int i = 0; i < memoTouchedCount; i++) {
      int slot = memoTouched[i];
      if (slot >= 257) {
        bytesMemo[slot - 257] = 0;
      } else {
        strMemo[slot] = 0;
      }
    }
    memoTouchedCount = 0;
    memoCount = 0;
    put(0x80);
    put(5);
    openFrame();
  }

  private Preimage pickleEnd() {
    put(0x2e); // STOP
    commitFrame();
    return this;
  }

  private void openFrame() {
    frameStart = len;
    for (int i = 0; i < FRAME_HEADER; i++) {
      put(0);
    }
  }

  /** Before each object is saved: a frame that reached 64 KiB is committed, a new one opened. */
  private void boundary() {
    if (len - frameStart - FRAME_HEADER >= PICKLE_FRAME_TARGET) {
      commitFrame();
      openFrame();
    }
  }

  private void commitFrame() {
    int payload = len - frameStart - FRAME_HEADER;
    if (payload >= 4) {
      buf[frameStart] = (byte) 0x95;
      for (int i = 0; i < 8; i++) {
        buf[frameStart + 1 + i] = (byte) ((long) payload >>> (8 * i));
      }
    } else {
      // frames shorter than 4 bytes are written without a FRAME header
      System.arraycopy(buf, frameStart + FRAME_HEADER, buf, frameStart, payload);
      len -= FRAME_HEADER;
    }
  }

  private void memoize() {
    put(0x94);
    memoCount++;
  }

  private void pickleTokens(int[] tokens, int from, int to) {
    int n = to - from;
    if (n == 0) {
      put(0x29); // EMPTY_TUPLE, not memoized
      return;
    }
    if (n > 3) {
      put(0x28); // MARK
    }
    for (int i = from; i < to; i++) {
      boundary();
      pickleInt(tokens[i]);
    }
    put(n == 1 ? 0x85 : n == 2 ? 0x86 : n == 3 ? 0x87 : 0x74);
    memoize();
  }

  private void pickleValue(Object v) {
    boundary();
    if (v == null) {
      put(0x4e); // NONE
    } else if (v instanceof String) {
      pickleString((String) v);
    } else if (v instanceof byte[]) {
      pickleBytes((byte[]) v);
    } else if (v instanceof Integer || v instanceof Long) {
      pickleLong(((Number) v).longValue());
    } else if (v instanceof BigInteger) {
      BigInteger x = (BigInteger) v;
      if (x.bitLength() < 64) {
        pickleLong(x.longValue());
      } else {
        pickleBigInt(x);
      }
    } else if (v instanceof List) {
      List<?> l = (List<?>) v;
      int n = l.size();
      if (n == 0) {
        put(0x29); // EMPTY_TUPLE, not memoized
        return;
      }
      if (n > 3) {
        put(0x28); // MARK
      }
      for (Object o : l) {
        pickleValue(o);
      }
      put(n == 1 ? 0x85 : n == 2 ? 0x86 : n == 3 ? 0x87 : 0x74);
      memoize();
    } else {
      throw new IllegalArgumentException(
          "unsupported extra-key value type "
              + v.getClass().getName()
              + " (use null, String, byte[], Integer, Long, BigInteger or List)");
    }
  }

  private void pickleString(String s) {
    int slot = s.isEmpty() ? 0 : s.length() == 1 && s.charAt(0) < 256 ? 1 + s.charAt(0) : -1;
    if (slot >= 0 && memoGet(strMemo, slot)) {
      return;
    }
    byte[] b = utf8SurrogatePass(s);
    boolean large = b.length >= PICKLE_FRAME_TARGET;
    if (large) {
      commitFrame();
    }
    if (b.length < 256) {
      put(0x8c); // SHORT_BINUNICODE
      put(b.length);
    } else {
      put(0x58); // BINUNICODE
      putLe32(b.length);
    }
    put(b, 0, b.length);
    if (large) {
      openFrame();
    }
    if (slot >= 0) {
      memoPut(strMemo, slot, slot);
    }
    memoize();
  }

  private void pickleBytes(byte[] b) {
    int slot = b.length == 0 ? 0 : b.length == 1 ? 1 + (b[0] & 0xff) : -1;
    if (slot >= 0 && memoGet(bytesMemo, slot)) {
      return;
    }
    boolean large = b.length >= PICKLE_FRAME_TARGET;
    if (large) {
      commitFrame();
    }
    if (b.length < 256) {
      put(0x43); // SHORT_BINBYTES
      put(b.length);
    } else {
      put(0x42); // BINBYTES
      putLe32(b.length);
    }
    put(b, 0, b.length);
    if (large) {
      openFrame();
    }
    if (slot >= 0) {
      memoPut(bytesMemo, slot, 257 + slot);
    }
    memoize();
  }

  /** Writes BINGET/LONG_BINGET and returns true when the singleton was memoized already. */
  private boolean memoGet(int[] memo, int slot) {
    int idx = memo[slot] - 1;
    if (idx < 0) {
      return false;
    }
    if (idx < 256) {
      put(0x68); // BINGET
      put(idx);
    } else {
      put(0x6a); // LONG_BINGET
      putLe32(idx);
    }
    return true;
  }

  private void memoPut(int[] memo, int slot, int touchKey) {
    memo[slot] = memoCount + 1; // the MEMOIZE that follows gets index memoCount
    if (memoTouchedCount == memoTouched.length) {
      memoTouched = Arrays.copyOf(memoTouched, memoTouchedCount * 2);
    }
    memoTouched[memoTouchedCount++] = touchKey;
  }

  private void pickleInt(int t) {
    if (t >= 0 && t <= 0xFF) {
      put(0x4b); // BININT1
      put(t);
    } else if (t >= 0 && t <= 0xFFFF) {
      put(0x4d); // BININT2
      put(t);
      put(t >>> 8);
    } else {
      put(0x4a); // BININT
      putLe32(t);
    }
  }

  private void pickleLong(long x) {
    if (x >= Integer.MIN_VALUE && x <= Integer.MAX_VALUE) {
      pickleInt((int) x);
    } else {
      pickleBigInt(BigInteger.valueOf(x));
    }
  }

  /** LONG1 / LONG4: minimal little-endian two's complement. */
  private void pickleBigInt(BigInteger x) {
    byte[] be = x.toByteArray(); // minimal big-endian two's complement, as CPython's encode_long
    if (be.length < 256) {
      put(0x8a); // LONG1
      put(be.length);
    } else {
      put(0x8b); // LONG4
      putLe32(be.length);
    }
    for (int i = be.length - 1; i >= 0; i--) {
      put(be[i]);
    }
  }

  /** UTF-8 as CPython encodes str for pickle: unpaired surrogates pass as 3-byte sequences. */
  private static byte[] utf8SurrogatePass(String s) {
    boolean plain = true;
    for (int i = 0; i < s.length() && plain; i++) {
      char c = s.charAt(i);
      if (Character.isHighSurrogate(c)) {
        plain = i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1));
        i++;
      } else if (Character.isLowSurrogate(c)) {
        plain = false;
      }
    }
    if (plain) {
      return s.getBytes(StandardCharsets.UTF_8);
    }
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream(s.length() * 3);
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      int cp = c;
      if (Character.isHighSurrogate(c)
          && i + 1 < s.length()
          && Character.isLowSurrogate(s.charAt(i + 1))) {
        cp = Character.toCodePoint(c, s.charAt(++i));
      }
      if (cp < 0x80) {
        out.write(cp);
      } else if (cp < 0x800) {
        out.write(0xc0 | cp >>> 6);
        out.write(0x80 | cp & 0x3f);
      } else if (cp < 0x10000) {
        out.write(0xe0 | cp >>> 12);
        out.write(0x80 | cp >>> 6 & 0x3f);
        out.write(0x80 | cp & 0x3f);
      } else {
        out.write(0xf0 | cp >>> 18);
        out.write(0x80 | cp >>> 12 & 0x3f);
        out.write(0x80 | cp >>> 6 & 0x3f);
        out.write(0x80 | cp & 0x3f);
      }
    }
    return out.toByteArray();
  }

  // ---------------------------------------------------------------- buffer

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
