package io.kvroute.benchmarks;

import java.io.IOException;
import java.io.UncheckedIOException;
import org.msgpack.core.MessageFormat;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.ValueType;

/**
 * Floors for ingestion: two decoders of a vLLM {@code KVEventBatch} payload that extract what the
 * index needs (block hashes, parent, tokens, block size, medium, LoRA, group) into arrays and apply
 * nothing. They accept array (A*) and map (M*) events, with no validation beyond what the reader
 * does itself, and return a checksum so the JIT cannot drop the work.
 *
 * <ul>
 *   <li>{@link #msgpackJava(byte[], byte[])}: msgpack-java's {@link MessageUnpacker} used as a
 *       careful caller would (keys and strings read into a reused buffer, uint64 read as raw bytes
 *       since {@code unpackLong} rejects values ≥ 2^63).
 *   <li>{@link #byteWalk(byte[])}: a plain walk over the bytes, one switch per value.
 * </ul>
 *
 * <p>Not thread-safe only in the scratch buffer the caller passes; otherwise stateless.
 */
final class IngestFloors {
  private IngestFloors() {}

  // BlockStored field ids, in vLLM's declaration order
  private static final int F_HASHES = 0;
  private static final int F_PARENT = 1;
  private static final int F_TOKENS = 2;
  private static final int F_BLOCK_SIZE = 3;
  private static final int F_OTHER = 99;

  // ------------------------------------------------------------------ msgpack-java

  /** Decodes with msgpack-java; {@code scratch} is a reusable buffer of at least 64 bytes. */
  static long msgpackJava(byte[] payload, byte[] scratch) {
    try (MessageUnpacker u = MessagePack.newDefaultUnpacker(payload)) {
      long check = 0;
      int batchLen = u.unpackArrayHeader();
      check += (long) u.unpackDouble();
      int events = u.unpackArrayHeader();
      for (int e = 0; e < events; e++) {
        check += mjEvent(u, scratch);
      }
      for (int i = 2; i < batchLen; i++) {
        u.skipValue();
      }
      return check;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static long mjEvent(MessageUnpacker u, byte[] scratch) throws IOException {
    long check = 0;
    if (u.getNextFormat().getValueType() == ValueType.ARRAY) {
      int m = u.unpackArrayHeader();
      check += mjString(u, scratch); // tag
      for (int p = 1; p < m; p++) {
        check += mjField(u, p - 1, scratch);
      }
    } else {
      int m = u.unpackMapHeader();
      for (int i = 0; i < m; i++) {
        int n = u.unpackRawStringHeader();
        u.readPayload(scratch, 0, n);
        check += mjField(u, fieldOfKey(scratch, n), scratch);
      }
    }
    return check;
  }

  private static long mjField(MessageUnpacker u, int id, byte[] scratch) throws IOException {
    switch (id) {
      case F_HASHES:
        {
          int n = u.unpackArrayHeader();
          long[] h = new long[n];
          for (int i = 0; i < n; i++) {
            h[i] = mjHash(u, scratch);
          }
          return h[n - 1];
        }
      case F_PARENT:
        if (u.tryUnpackNil()) {
          return 0;
        }
        return mjHash(u, scratch);
      case F_TOKENS:
        {
          int n = u.unpackArrayHeader();
          int[] t = new int[n];
          for (int i = 0; i < n; i++) {
            t[i] = u.unpackInt();
          }
          return t[n - 1];
        }
      default:
        {
          MessageFormat f = u.getNextFormat();
          switch (f.getValueType()) {
            case NIL:
              u.unpackNil();
              return 0;
            case INTEGER:
              return u.unpackLong();
            case STRING:
              return mjString(u, scratch);
            default:
              u.skipValue();
              return 1;
          }
        }
    }
  }

  private static long mjHash(MessageUnpacker u, byte[] scratch) throws IOException {
    if (u.getNextFormat() == MessageFormat.UINT64) {
      u.readPayload(scratch, 0, 9);
      long v = 0;
      for (int i = 1; i < 9; i++) {
        v = (v << 8) | (scratch[i] & 0xffL);
      }
      return v;
    }
    return u.unpackLong();
  }

  private static long mjString(MessageUnpacker u, byte[] scratch) throws IOException {
    int n = u.unpackRawStringHeader();
    u.readPayload(scratch, 0, n);
    return n;
  }

  /** The field id of a map key (by length and a distinguishing byte). */
  private static int fieldOfKey(byte[] k, int n) {
    switch (n) {
      case 12:
        return k[0] == 'b' ? F_HASHES : F_OTHER; // block_hashes
      case 17:
        return k[0] == 'p' ? F_PARENT : F_OTHER; // parent_block_hash
      case 9:
        return k[0] == 't' ? F_TOKENS : F_OTHER; // token_ids
      case 10:
        return k[0] == 'b' ? F_BLOCK_SIZE : F_OTHER; // block_size
      default:
        return F_OTHER;
    }
  }

  // ------------------------------------------------------------------ plain walk

  /** Decodes with a plain walk over the bytes. */
  static long byteWalk(byte[] p) {
    Walk w = new Walk(p);
    long check = 0;
    int batchLen = w.arrayHeader();
    check += (long) w.float64();
    int events = w.arrayHeader();
    for (int e = 0; e < events; e++) {
      check += w.event();
    }
    for (int i = 2; i < batchLen; i++) {
      check += w.scalar();
    }
    return check;
  }

  /** One pass; not thread-safe. */
  private static final class Walk {
    final byte[] b;
    int pos;

    Walk(byte[] b) {
      this.b = b;
    }

    int u8() {
      return b[pos++] & 0xff;
    }

    int u16() {
      int v = (b[pos] & 0xff) << 8 | (b[pos + 1] & 0xff);
      pos += 2;
      return v;
    }

    int s32() {
      int v =
          (b[pos] & 0xff) << 24
              | (b[pos + 1] & 0xff) << 16
              | (b[pos + 2] & 0xff) << 8
              | (b[pos + 3] & 0xff);
      pos += 4;
      return v;
    }

    long s64() {
      long hi = s32() & 0xffffffffL;
      long lo = s32() & 0xffffffffL;
      return hi << 32 | lo;
    }

    double float64() {
      pos++; // 0xcb
      return Double.longBitsToDouble(s64());
    }

    int arrayHeader() {
      int c = u8();
      if ((c & 0xf0) == 0x90) {
        return c & 0x0f;
      }
      return c == 0xdc ? u16() : s32();
    }

    int mapHeader() {
      int c = u8();
      if ((c & 0xf0) == 0x80) {
        return c & 0x0f;
      }
      return c == 0xde ? u16() : s32();
    }

    /**
     * Integer (any width), nil (0) or a string (its length, skipped). The int formats are read as
     * {@code KvEventCodec} reads them, written again on purpose: the floor runs none of the codec's
     * code (no bounds checks, no error paths), or it would not be a floor.
     */
    long scalar() {
      int c = u8();
      if (c < 0x80) {
        return c;
      }
      if (c >= 0xe0) {
        return (byte) c;
      }
      if ((c & 0xe0) == 0xa0) {
        pos += c & 0x1f;
        return c & 0x1f;
      }
      switch (c) {
        case 0xc0:
          return 0;
        case 0xcc:
          return u8();
        case 0xcd:
          return u16();
        case 0xce:
          return s32() & 0xffffffffL;
        case 0xcf:
        case 0xd3:
          return s64();
        case 0xd0:
          return (byte) u8();
        case 0xd1:
          return (short) u16();
        case 0xd2:
          return s32();
        case 0xd9:
          {
            int n = u8();
            pos += n;
            return n;
          }
        default:
          throw new IllegalStateException("unexpected format byte " + c);
      }
    }

    long event() {
      long check = 0;
      int c = b[pos] & 0xff;
      if ((c & 0xf0) == 0x90 || c == 0xdc) {
        int m = arrayHeader();
        check += scalar(); // tag
        for (int p = 1; p < m; p++) {
          check += field(p - 1);
        }
      } else {
        int m = mapHeader();
        for (int i = 0; i < m; i++) {
          int n = u8() & 0x1f; // keys are fixstr
          int id = fieldOf(n);
          pos += n;
          check += field(id);
        }
      }
      return check;
    }

    private int fieldOf(int n) {
      int k = b[pos];
      switch (n) {
        case 12:
          return k == 'b' ? F_HASHES : F_OTHER;
        case 17:
          return k == 'p' ? F_PARENT : F_OTHER;
        case 9:
          return k == 't' ? F_TOKENS : F_OTHER;
        case 10:
          return k == 'b' ? F_BLOCK_SIZE : F_OTHER;
        default:
          return F_OTHER;
      }
    }

    long field(int id) {
      switch (id) {
        case F_HASHES:
          {
            int n = arrayHeader();
            long[] h = new long[n];
            for (int i = 0; i < n; i++) {
              h[i] = scalar();
            }
            return h[n - 1];
          }
        case F_TOKENS:
          {
            int n = arrayHeader();
            int[] t = new int[n];
            for (int i = 0; i < n; i++) {
              t[i] = (int) scalar();
            }
            return t[n - 1];
          }
        default:
          return scalar();
      }
    }
  }
}
