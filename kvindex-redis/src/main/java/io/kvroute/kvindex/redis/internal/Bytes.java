package io.kvroute.kvindex.redis.internal;

import java.nio.charset.StandardCharsets;

/** Key and value encoding helpers. Stateless. */
final class Bytes {
  private Bytes() {}

  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  static String str(byte[] b) {
    return new String(b, StandardCharsets.UTF_8);
  }

  static byte[] num(long v) {
    return Long.toString(v).getBytes(StandardCharsets.US_ASCII);
  }

  static long parseLong(Object o) {
    if (o instanceof Long) {
      return (Long) o;
    }
    return Long.parseLong(new String((byte[]) o, StandardCharsets.US_ASCII));
  }

  /** {@code prefix} followed by the 8 big-endian bytes of {@code v}. */
  static byte[] key(byte[] prefix, long v) {
    byte[] k = new byte[prefix.length + 8];
    System.arraycopy(prefix, 0, k, 0, prefix.length);
    putLong(k, prefix.length, v);
    return k;
  }

  static void putLong(byte[] b, int off, long v) {
    for (int i = 7; i >= 0; i--) {
      b[off + i] = (byte) v;
      v >>>= 8;
    }
  }

  static long getLong(byte[] b, int off) {
    long v = 0;
    for (int i = 0; i < 8; i++) {
      v = (v << 8) | (b[off + i] & 0xffL);
    }
    return v;
  }

  static byte[] concat(byte[] a, byte[] b) {
    byte[] r = new byte[a.length + b.length];
    System.arraycopy(a, 0, r, 0, a.length);
    System.arraycopy(b, 0, r, a.length, b.length);
    return r;
  }
}
