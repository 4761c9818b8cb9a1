package io.kvroute.kvindex.event;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.math.BigInteger;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessagePacker;

/**
 * Decodes and encodes vLLM/SGLang {@code KVEventBatch} msgpack payloads (the third ZMQ frame).
 *
 * <p><b>Decoding</b> accepts every schema family of spec §1.6 and §4: the outer batch as {@code
 * [ts, events, dp_rank]}, the 2-element A0 form {@code [ts, events]} and, defensively, a map {@code
 * {"ts", "events", "data_parallel_rank"|"attn_dp_rank"}}; each event as a positional array (tag
 * first, any length ≥ the minimum, missing trailing fields are {@code None}, extra ones ignored) or
 * as a map tagged by {@code "type"} (fields looked up by name, unknown keys ignored), mixed freely
 * within a batch. Unknown tags are skipped and counted in {@link KvEventBatch#unknownEvents()}.
 * Hashes may be signed or unsigned 64-bit ints or bytes (see {@link EngineHashes}). {@code
 * extra_keys} must be what vLLM declares, {@code list[tuple | None] | None}: an entry that is not
 * {@code nil} or an array (a bare string, say) is rejected as msgspec would reject it. Malformed
 * input raises {@link KvEventDecodeException} (with the byte offset) and nothing else; every length
 * prefix is checked against the remaining bytes before anything is allocated, and nesting is
 * limited to {@value #MAX_DEPTH} levels. The decoder walks the bytes itself (msgpack-java is used
 * only to encode).
 *
 * <p><b>Encoding</b> reproduces {@code msgspec.msgpack.Encoder().encode(batch)} byte for byte for
 * the batch's {@link EventSchema}: array events write every declared field (trailing {@code nil}s
 * too); map events write {@code "type"} first, then the declared fields in order, omitting
 * defaulted fields that are {@code null} and always writing required ones; uint64 hashes ≥ 2^63 as
 * {@code cf}; {@code ts} always float64.
 *
 * <p>Stateless; all methods are thread-safe.
 */
public final class KvEventCodec {

  /** Maximum nesting depth of generic values (extra keys) accepted by the decoder. */
  public static final int MAX_DEPTH = 32;

  /** How array positions past the common prefix are interpreted. */
  public enum Dialect {
    /** vLLM field positions (spec §1.6). */
    VLLM,
    /**
     * SGLang: positions up to {@code medium} as vLLM's; later array positions (SGLang's own {@code
     * cache_salt}, {@code session_id}, ...) are ignored. The batch's third element is {@code
     * attn_dp_rank}.
     */
    SGLANG
  }

  private KvEventCodec() {}

  /** Decodes a whole payload with the vLLM dialect. */
  public static KvEventBatch decode(byte[] payload) {
    Objects.requireNonNull(payload, "payload");
    return decode(payload, 0, payload.length, Dialect.VLLM);
  }

  /**
   * Decodes {@code length} bytes of {@code payload} from {@code offset}.
   *
   * @throws KvEventDecodeException if the bytes are not exactly one well-formed batch
   */
  public static KvEventBatch decode(byte[] payload, int offset, int length, Dialect dialect) {
    Objects.requireNonNull(payload, "payload");
    Objects.requireNonNull(dialect, "dialect");
    Objects.checkFromIndexSize(offset, length, payload.length);
    Decoder d = new Decoder(payload, offset, length, dialect);
    try {
      return d.batch();
    } catch (KvEventDecodeException e) {
      throw e;
    } catch (RuntimeException | StackOverflowError e) {
      String what = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
      throw new KvEventDecodeException("malformed msgpack: " + what, d.pos(), e);
    }
  }

  /** Encodes {@code batch} in its own {@link KvEventBatch#schema()}. */
  public static byte[] encode(KvEventBatch batch) {
    return encode(batch, batch.schema());
  }

  /**
   * Encodes {@code batch} exactly as msgspec would for {@code schema}. Fields the schema does not
   * declare are not written.
   *
   * @throws IllegalArgumentException if an extra-key value has a type msgpack cannot carry
   */
  public static byte[] encode(KvEventBatch batch, EventSchema schema) {
    Objects.requireNonNull(batch, "batch");
    Objects.requireNonNull(schema, "schema");
    MessageBufferPacker p = MessagePack.newDefaultBufferPacker();
    try {
      new Encoder(p, schema).batch(batch);
      return p.toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  // ------------------------------------------------------------------ decoder

  private static final byte[] TAG_STORED = ascii("BlockStored");
  private static final byte[] TAG_REMOVED = ascii("BlockRemoved");
  private static final byte[] TAG_CLEARED = ascii("AllBlocksCleared");
  private static final byte[] KEY_TYPE = ascii("type");
  private static final byte[][] STORED_KEYS = asciiAll(EventSchema.STORED_FIELDS);
  private static final String[] COMMON_STRINGS = {
    "GPU", "CPU", "STORAGE", "full_attention", "sliding_window", "mamba", "CPU_PINNED", "DISK"
  };
  private static final byte[][] COMMON_STRING_BYTES = asciiAll(COMMON_STRINGS);
  private static final byte[][] BATCH_KEYS = {
    ascii("ts"), ascii("events"), ascii("data_parallel_rank"), ascii("attn_dp_rank")
  };

  private static final int F_HASHES = 0;
  private static final int F_PARENT = 1;
  private static final int F_TOKENS = 2;
  private static final int F_BLOCK_SIZE = 3;
  private static final int F_LORA_ID = 4;
  private static final int F_MEDIUM = 5;
  private static final int F_LORA_NAME = 6;
  private static final int F_EXTRA = 7;
  private static final int F_GROUP = 8;
  private static final int F_KIND = 9;
  private static final int F_WINDOW = 10;
  private static final int F_LOCALITY = 11;
  private static final int F_OWNERSHIP = 12;
  private static final int F_SESSION = 13;
  private static final int[] REMOVED_POSITIONS = {
    F_HASHES, F_MEDIUM, F_GROUP, F_LOCALITY, F_OWNERSHIP
  };

  private static final int[] EMPTY_TOKENS = new int[0];
  private static final int TAG_UNKNOWN = 0;
  private static final int T_STORED = 1;
  private static final int T_REMOVED = 2;
  private static final int T_CLEARED = 3;

  private static byte[] ascii(String s) {
    return s.getBytes(StandardCharsets.US_ASCII);
  }

  private static byte[][] asciiAll(String[] s) {
    byte[][] out = new byte[s.length][];
    for (int i = 0; i < s.length; i++) {
      out[i] = ascii(s[i]);
    }
    return out;
  }

  /**
   * One decoding pass: a hand-written walk over the bytes (no msgpack-java on this path; it costs
   * several times more per token). Every length is checked against the remaining bytes before
   * anything is allocated. Not thread-safe, used by one call.
   */
  private static final class Decoder {
    private static final VarHandle BE_LONG =
        MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);
    private static final VarHandle BE_INT =
        MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.BIG_ENDIAN);
    private static final VarHandle BE_SHORT =
        MethodHandles.byteArrayViewVarHandle(short[].class, ByteOrder.BIG_ENDIAN);

    private final byte[] b;
    private final int start;
    private final int end;
    private final Dialect dialect;
    private int pos;
    // the last key or tag read: b[keyPos, keyPos + keyLen)
    private int keyPos;
    private int keyLen;

    // schema detection
    private int storedArrayLen = -1;
    private int removedArrayLen = -1;
    private boolean sawMapEvent;
    private boolean sawLocality;
    private boolean sawM2;
    private int unknown;

    // per-event field scratch
    private EngineHashes hashes;
    private EngineHashes parent;
    private int[] tokens;
    private int blockSize;
    private Long loraId;
    private String medium;
    private String loraName;
    private List<Object> extraKeys;
    private Integer groupIdx;
    private String kind;
    private Integer window;
    private Object locality;
    private Object ownership;
    private Object sessionId;

    Decoder(byte[] payload, int offset, int length, Dialect dialect) {
      this.b = payload;
      this.start = offset;
      this.end = offset + length;
      this.pos = offset;
      this.dialect = dialect;
    }

    long pos() {
      return pos - start;
    }

    private KvEventDecodeException err(String message) {
      return new KvEventDecodeException(message, pos(), null);
    }

    private int remaining() {
      return end - pos;
    }

    private void need(int n) {
      if (n > end - pos) {
        throw err("unexpected end of payload");
      }
    }

    /** The next format byte, not consumed. */
    private int peek() {
      if (pos >= end) {
        throw err("unexpected end of payload");
      }
      return b[pos] & 0xff;
    }

    private int u8() {
      need(1);
      return b[pos++] & 0xff;
    }

    private int u16() {
      need(2);
      int v = (short) BE_SHORT.get(b, pos) & 0xffff;
      pos += 2;
      return v;
    }

    private int s32() {
      need(4);
      int v = (int) BE_INT.get(b, pos);
      pos += 4;
      return v;
    }

    private long s64() {
      need(8);
      long v = (long) BE_LONG.get(b, pos);
      pos += 8;
      return v;
    }

    /** A length prefix of up to 32 bits; negative (≥ 2^31) lengths are rejected. */
    private int len32(String what) {
      int n = s32();
      if (n < 0) {
        throw err(what + " declares " + Integer.toUnsignedString(n) + " elements or bytes");
      }
      return n;
    }

    private static String typeName(int c) {
      if (c <= 0x7f || c >= 0xe0 || (c >= 0xcc && c <= 0xd3)) {
        return "INTEGER";
      }
      if (c <= 0x8f || c == 0xde || c == 0xdf) {
        return "MAP";
      }
      if (c <= 0x9f || c == 0xdc || c == 0xdd) {
        return "ARRAY";
      }
      if (c <= 0xbf || (c >= 0xd9 && c <= 0xdb)) {
        return "STRING";
      }
      switch (c) {
        case 0xc0:
          return "NIL";
        case 0xc2:
        case 0xc3:
          return "BOOLEAN";
        case 0xc4:
        case 0xc5:
        case 0xc6:
          return "BINARY";
        case 0xca:
        case 0xcb:
          return "FLOAT";
        case 0xc1:
          return "NEVER_USED";
        default:
          return "EXTENSION";
      }
    }

    private static boolean isArray(int c) {
      return (c & 0xf0) == 0x90 || c == 0xdc || c == 0xdd;
    }

    private static boolean isMap(int c) {
      return (c & 0xf0) == 0x80 || c == 0xde || c == 0xdf;
    }

    private static boolean isString(int c) {
      return (c & 0xe0) == 0xa0 || (c >= 0xd9 && c <= 0xdb);
    }

    private static boolean isInt(int c) {
      return c <= 0x7f || c >= 0xe0 || (c >= 0xcc && c <= 0xd3);
    }

    private int arrayHeader(String what) {
      int c = peek();
      int n;
      if ((c & 0xf0) == 0x90) {
        pos++;
        n = c & 0x0f;
      } else if (c == 0xdc) {
        pos++;
        n = u16();
      } else if (c == 0xdd) {
        pos++;
        n = len32(what);
      } else {
        throw err(what + " must be an array, was " + typeName(c));
      }
      if (n > remaining()) {
        throw err(what + " declares " + n + " elements but only " + remaining() + " bytes remain");
      }
      return n;
    }

    private int mapHeader(String what) {
      int c = peek();
      int n;
      if ((c & 0xf0) == 0x80) {
        pos++;
        n = c & 0x0f;
      } else if (c == 0xde) {
        pos++;
        n = u16();
      } else if (c == 0xdf) {
        pos++;
        n = len32(what);
      } else {
        throw err(what + " must be a map, was " + typeName(c));
      }
      if (2L * n > remaining()) {
        throw err(what + " declares " + n + " entries but only " + remaining() + " bytes remain");
      }
      return n;
    }

    /** The byte length of a str value whose header is next (consumed); the caller checked str. */
    private int strHeader(String what) {
      int c = u8();
      int n;
      if ((c & 0xe0) == 0xa0) {
        n = c & 0x1f;
      } else if (c == 0xd9) {
        n = u8();
      } else if (c == 0xda) {
        n = u16();
      } else {
        n = len32(what);
      }
      return lengthChecked(n, what);
    }

    /** The byte length of a bin value whose header is next (consumed); the caller checked bin. */
    private int binHeader(String what) {
      int c = u8();
      int n = c == 0xc4 ? u8() : c == 0xc5 ? u16() : len32(what);
      return lengthChecked(n, what);
    }

    private int lengthChecked(int n, String what) {
      if (n < 0 || n > remaining()) {
        throw err(what + " declares " + n + " bytes but only " + remaining() + " remain");
      }
      return n;
    }

    private byte[] bytes(int n) {
      byte[] out = Arrays.copyOfRange(b, pos, pos + n);
      pos += n;
      return out;
    }

    /** Reads a str key into (keyPos, keyLen). */
    private void readKey(String what) {
      int c = peek();
      if (!isString(c)) {
        throw err(what + " must be a string, was " + typeName(c));
      }
      keyLen = strHeader(what);
      keyPos = pos;
      pos += keyLen;
    }

    private boolean keyIs(byte[] key) {
      if (keyLen != key.length) {
        return false;
      }
      for (int i = 0; i < key.length; i++) {
        if (b[keyPos + i] != key[i]) {
          return false;
        }
      }
      return true;
    }

    private int keyIndex(byte[][] keys) {
      for (int i = 0; i < keys.length; i++) {
        if (keyIs(keys[i])) {
          return i;
        }
      }
      return -1;
    }

    /** A signed integer of any msgpack int format; uint64 values come back as their bits. */
    private long intBits(int c, String what) {
      if (c <= 0x7f) {
        pos++;
        return c;
      }
      if (c >= 0xe0) {
        pos++;
        return (byte) c;
      }
      pos++;
      switch (c) {
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
          need(2);
          short s = (short) BE_SHORT.get(b, pos);
          pos += 2;
          return s;
        case 0xd2:
          return s32();
        default:
          pos--;
          throw err(what + " must be an int, was " + typeName(c));
      }
    }

    KvEventBatch batch() {
      int f = peek();
      double ts;
      List<KvEvent> events;
      Integer dp = null;
      int batchLen;
      if (isArray(f)) {
        batchLen = arrayHeader("batch");
        if (batchLen < 2) {
          throw err("batch array must have at least 2 elements (ts, events), had " + batchLen);
        }
        ts = readDouble("ts");
        events = events();
        if (batchLen >= 3) {
          dp = readOptInt("data_parallel_rank");
        }
        for (int i = 3; i < batchLen; i++) {
          skip(0);
        }
      } else if (isMap(f)) {
        int n = mapHeader("batch");
        batchLen = 3;
        Double tsSeen = null;
        events = null;
        for (int i = 0; i < n; i++) {
          readKey("batch key");
          int k = keyIndex(BATCH_KEYS);
          if (k == 0) {
            tsSeen = readDouble("ts");
          } else if (k == 1) {
            events = events();
          } else if (k == 2 || k == 3) {
            dp = readOptInt("data_parallel_rank");
          } else {
            skip(0);
          }
        }
        if (tsSeen == null || events == null) {
          throw err("map batch needs \"ts\" and \"events\"");
        }
        ts = tsSeen;
      } else {
        throw err("batch must be an array or a map, was " + typeName(f));
      }
      if (remaining() != 0) {
        throw err(remaining() + " trailing bytes after the batch");
      }
      return new KvEventBatch(ts, events, dp, detect(batchLen), unknown);
    }

    private EventSchema detect(int batchLen) {
      if (batchLen == 2) {
        return EventSchema.A0;
      }
      if (sawMapEvent) {
        return sawM2 ? EventSchema.M2 : sawLocality ? EventSchema.M1 : EventSchema.M0;
      }
      if (storedArrayLen > 0) {
        switch (storedArrayLen) {
          case 5:
          case 6:
            return EventSchema.A0_DP;
          case 7:
            return EventSchema.A1;
          case 8:
            return EventSchema.A2;
          case 9:
            return EventSchema.A3;
          case 10:
            return EventSchema.A4;
          default:
            return EventSchema.A5;
        }
      }
      if (removedArrayLen > 0) {
        return removedArrayLen <= 2
            ? EventSchema.A0_DP
            : removedArrayLen == 3 ? EventSchema.A2 : EventSchema.A5;
      }
      return EventSchema.A5;
    }

    private List<KvEvent> events() {
      int n = arrayHeader("events");
      if (n == 1) { // the common case: one event per scheduler step
        KvEvent e = event();
        return e == null ? List.of() : List.of(e);
      }
      KvEvent[] out = new KvEvent[n];
      int k = 0;
      for (int i = 0; i < n; i++) {
        KvEvent e = event();
        if (e != null) {
          out[k++] = e;
        }
      }
      return Collections.unmodifiableList(Arrays.asList(k == n ? out : Arrays.copyOf(out, k)));
    }

    private int tag() {
      readKey("event tag");
      if (keyIs(TAG_STORED)) {
        return T_STORED;
      } else if (keyIs(TAG_REMOVED)) {
        return T_REMOVED;
      } else if (keyIs(TAG_CLEARED)) {
        return T_CLEARED;
      }
      return TAG_UNKNOWN;
    }

    private void resetFields() {
      hashes = null;
      parent = null;
      tokens = null;
      blockSize = 0;
      loraId = null;
      medium = null;
      loraName = null;
      extraKeys = null;
      groupIdx = null;
      kind = null;
      window = null;
      locality = null;
      ownership = null;
      sessionId = null;
    }

    private KvEvent event() {
      int f = peek();
      resetFields();
      int tag;
      if (isArray(f)) {
        int m = arrayHeader("event");
        if (m < 1) {
          throw err("event array is empty (no tag)");
        }
        tag = tag();
        if (tag == T_STORED) {
          if (m < 5) {
            throw err("BlockStored array needs at least 5 elements, had " + m);
          }
          if (storedArrayLen < 0) {
            storedArrayLen = m;
          }
          int limit = dialect == Dialect.SGLANG ? F_MEDIUM + 1 : EventSchema.STORED_FIELDS.length;
          for (int p = 1; p < m; p++) {
            if (p - 1 < limit) {
              field(p - 1);
            } else {
              skip(0);
            }
          }
        } else if (tag == T_REMOVED) {
          if (m < 2) {
            throw err("BlockRemoved array needs at least 2 elements, had " + m);
          }
          if (removedArrayLen < 0) {
            removedArrayLen = m;
          }
          int limit = dialect == Dialect.SGLANG ? 2 : REMOVED_POSITIONS.length;
          for (int p = 1; p < m; p++) {
            if (p - 1 < limit) {
              field(REMOVED_POSITIONS[p - 1]);
            } else {
              skip(0);
            }
          }
        } else {
          for (int p = 1; p < m; p++) {
            skip(0);
          }
        }
      } else if (isMap(f)) {
        sawMapEvent = true;
        int m = mapHeader("event");
        tag = -1;
        for (int i = 0; i < m; i++) {
          readKey("event key");
          if (keyIs(KEY_TYPE)) {
            tag = tag();
            continue;
          }
          int k = storedKey();
          if (k < 0) {
            skip(0);
          } else {
            if (k == F_LOCALITY) {
              sawLocality = true;
            } else if (k == F_OWNERSHIP || k == F_SESSION) {
              sawM2 = true;
            }
            field(k);
          }
        }
        if (tag < 0) {
          throw err("map event has no \"type\"");
        }
        if (tag == T_STORED || tag == T_REMOVED) {
          if (hashes == null) {
            throw err("map event has no \"block_hashes\"");
          }
        }
      } else {
        throw err("event must be an array or a map, was " + typeName(f));
      }
      switch (tag) {
        case T_STORED:
          return new KvEvent.BlockStored(
              hashes,
              parent,
              tokens == null ? EMPTY_TOKENS : tokens,
              blockSize,
              loraId,
              medium,
              loraName,
              extraKeys,
              groupIdx,
              kind,
              window,
              locality,
              ownership,
              sessionId);
        case T_REMOVED:
          return new KvEvent.BlockRemoved(hashes, medium, groupIdx, locality, ownership);
        case T_CLEARED:
          return KvEvent.AllBlocksCleared.INSTANCE;
        default:
          unknown++;
          return null;
      }
    }

    /** The BlockStored field id of the last key, or -1 (keys are matched by length first). */
    private int storedKey() {
      for (int i = 0; i < STORED_KEYS.length; i++) {
        if (STORED_KEYS[i].length == keyLen && keyIs(STORED_KEYS[i])) {
          return i;
        }
      }
      return -1;
    }

    private void field(int id) {
      switch (id) {
        case F_HASHES:
          hashes = readHashes();
          break;
        case F_PARENT:
          parent = nil() ? null : readParent();
          break;
        case F_TOKENS:
          tokens = readTokens();
          break;
        case F_BLOCK_SIZE:
          Integer bs = readOptInt("block_size");
          blockSize = bs == null ? 0 : bs;
          break;
        case F_LORA_ID:
          loraId = readOptLong("lora_id");
          break;
        case F_MEDIUM:
          medium = readOptString("medium");
          break;
        case F_LORA_NAME:
          loraName = readOptString("lora_name");
          break;
        case F_EXTRA:
          extraKeys = readExtraKeys();
          break;
        case F_GROUP:
          groupIdx = readOptInt("group_idx");
          break;
        case F_KIND:
          kind = readOptString("kv_cache_spec_kind");
          break;
        case F_WINDOW:
          window = readOptInt("kv_cache_spec_sliding_window");
          break;
        case F_LOCALITY:
          locality = value(0);
          break;
        case F_OWNERSHIP:
          ownership = value(0);
          break;
        case F_SESSION:
          sessionId = value(0);
          break;
        default:
          skip(0);
      }
    }

    private boolean nil() {
      if (peek() == 0xc0) {
        pos++;
        return true;
      }
      return false;
    }

    /** Skips one value of any type (checked like {@link #value}, nothing allocated). */
    private void skip(int depth) {
      if (depth > MAX_DEPTH) {
        throw err("values nested deeper than " + MAX_DEPTH);
      }
      int c = peek();
      if (isInt(c)) {
        intBits(c, "value");
      } else if (isString(c)) {
        int n = strHeader("string"); // not "pos += strHeader(...)": the header moves pos
        pos += n;
      } else if (isArray(c)) {
        int n = arrayHeader("array");
        for (int i = 0; i < n; i++) {
          skip(depth + 1);
        }
      } else if (isMap(c)) {
        int n = mapHeader("map");
        for (int i = 0; i < 2 * n; i++) {
          skip(depth + 1);
        }
      } else {
        switch (c) {
          case 0xc0:
          case 0xc2:
          case 0xc3:
            pos++;
            break;
          case 0xc4:
          case 0xc5:
          case 0xc6:
            int n = binHeader("bytes");
            pos += n;
            break;
          case 0xca:
            pos++;
            need(4);
            pos += 4;
            break;
          case 0xcb:
            pos++;
            need(8);
            pos += 8;
            break;
          default:
            throw err("unsupported msgpack type " + typeName(c));
        }
      }
    }

    private EngineHashes readHashes() {
      int n = arrayHeader("block_hashes");
      long[] values = new long[n];
      byte[][] raw = null;
      boolean signed = false;
      for (int i = 0; i < n; i++) {
        int c = peek();
        if (c == 0xcf) { // uint64, the common case
          pos++;
          values[i] = s64();
        } else if (c >= 0xc4 && c <= 0xc6) {
          byte[] h = bytes(binHeader("hash bytes"));
          if (raw == null) {
            raw = new byte[n][];
          }
          raw[i] = h;
          values[i] = EngineHashes.u64OfBytes(h);
        } else if (isInt(c)) {
          values[i] = intBits(c, "block hash");
          signed |= values[i] < 0;
        } else {
          throw err("block hash must be an int or bytes, was " + typeName(c));
        }
      }
      return EngineHashes.of(values, raw, signed);
    }

    private EngineHashes readParent() {
      int c = peek();
      if (c >= 0xc4 && c <= 0xc6) {
        byte[] h = bytes(binHeader("hash bytes"));
        return EngineHashes.of(new long[] {EngineHashes.u64OfBytes(h)}, new byte[][] {h}, false);
      }
      if (!isInt(c)) {
        throw err("block hash must be an int or bytes, was " + typeName(c));
      }
      long v = intBits(c, "block hash");
      return EngineHashes.of(new long[] {v}, null, v < 0 && c != 0xcf);
    }

    private int[] readTokens() {
      if (nil()) {
        return EMPTY_TOKENS;
      }
      int n = arrayHeader("token_ids");
      int[] t = new int[n];
      byte[] a = b;
      int p = pos;
      int e = end;
      for (int i = 0; i < n; i++) {
        if (p >= e) {
          pos = p;
          throw err("unexpected end of payload");
        }
        int c = a[p] & 0xff;
        if (c <= 0x7f) { // positive fixint
          t[i] = c;
          p++;
        } else if (c == 0xce && p + 5 <= e) { // uint32
          long v = (int) BE_INT.get(a, p + 1) & 0xffffffffL;
          if (v > Integer.MAX_VALUE) {
            pos = p;
            throw err("token id out of int range: " + v);
          }
          t[i] = (int) v;
          p += 5;
        } else if (c == 0xcd && p + 3 <= e) { // uint16
          t[i] = (short) BE_SHORT.get(a, p + 1) & 0xffff;
          p += 3;
        } else {
          pos = p;
          t[i] = tokenSlow(c);
          p = pos;
        }
      }
      pos = p;
      return t;
    }

    private int tokenSlow(int c) {
      if (!isInt(c)) {
        throw err("token_ids must hold ints, was " + typeName(c));
      }
      boolean u64 = c == 0xcf;
      long v = intBits(c, "token id");
      if (u64 && v < 0) {
        throw err("token id out of int range: " + Long.toUnsignedString(v));
      }
      if (v < Integer.MIN_VALUE || v > Integer.MAX_VALUE) {
        throw err("token id out of int range: " + v);
      }
      return (int) v;
    }

    private double readDouble(String what) {
      int c = peek();
      if (c == 0xcb) {
        pos++;
        return Double.longBitsToDouble(s64());
      }
      if (c == 0xca) {
        pos++;
        return Float.intBitsToFloat(s32());
      }
      if (isInt(c) && c != 0xcf) {
        return intBits(c, what);
      }
      throw err(what + " must be a number, was " + typeName(c));
    }

    private Long readOptLong(String what) {
      if (nil()) {
        return null;
      }
      int c = peek();
      if (!isInt(c) || c == 0xcf) {
        throw err(what + " must be an int64, was " + (c == 0xcf ? "UINT64" : typeName(c)));
      }
      return intBits(c, what);
    }

    private Integer readOptInt(String what) {
      Long v = readOptLong(what);
      if (v == null) {
        return null;
      }
      if (v < Integer.MIN_VALUE || v > Integer.MAX_VALUE) {
        throw err(what + " out of int range: " + v);
      }
      return v.intValue();
    }

    private String readOptString(String what) {
      if (nil()) {
        return null;
      }
      int c = peek();
      if (!isString(c)) {
        throw err(what + " must be a string, was " + typeName(c));
      }
      readKey(what);
      for (int i = 0; i < COMMON_STRINGS.length; i++) {
        if (keyIs(COMMON_STRING_BYTES[i])) {
          return COMMON_STRINGS[i];
        }
      }
      return new String(b, keyPos, keyLen, StandardCharsets.UTF_8);
    }

    /**
     * {@code extra_keys}: vLLM's {@code list[tuple[Any, ...] | None] | None}. Like msgspec, an
     * entry that is neither {@code nil} nor an array (a bare string, say) is rejected.
     */
    private List<Object> readExtraKeys() {
      if (nil()) {
        return null;
      }
      int n = arrayHeader("extra_keys");
      Object[] out = new Object[n];
      for (int i = 0; i < n; i++) {
        int c = peek();
        if (c == 0xc0) {
          pos++;
        } else if (isArray(c)) {
          out[i] = value(1);
        } else {
          throw err(
              "extra_keys["
                  + i
                  + "] must be a tuple (msgpack array) or nil, was "
                  + typeName(c)
                  + " (vLLM's type is list[tuple | None])");
        }
      }
      return Collections.unmodifiableList(Arrays.asList(out));
    }

    /** A generic msgpack value. */
    private Object value(int depth) {
      if (depth > MAX_DEPTH) {
        throw err("values nested deeper than " + MAX_DEPTH);
      }
      int c = peek();
      if (isInt(c)) {
        if (c == 0xcf) {
          long v = intBits(c, "value");
          return v >= 0 ? (Object) v : new BigInteger(Long.toUnsignedString(v));
        }
        return intBits(c, "value");
      }
      if (isString(c)) {
        int n = strHeader("string");
        String s = new String(b, pos, n, StandardCharsets.UTF_8);
        pos += n;
        return s;
      }
      if (isArray(c)) {
        int n = arrayHeader("array");
        Object[] l = new Object[n];
        for (int i = 0; i < n; i++) {
          l[i] = value(depth + 1);
        }
        return Collections.unmodifiableList(Arrays.asList(l));
      }
      if (isMap(c)) {
        int n = mapHeader("map");
        Map<Object, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < n; i++) {
          Object k = value(depth + 1);
          m.put(k, value(depth + 1));
        }
        return Collections.unmodifiableMap(m);
      }
      switch (c) {
        case 0xc0:
          pos++;
          return null;
        case 0xc2:
          pos++;
          return Boolean.FALSE;
        case 0xc3:
          pos++;
          return Boolean.TRUE;
        case 0xc4:
        case 0xc5:
        case 0xc6:
          return bytes(binHeader("bytes"));
        case 0xca:
          pos++;
          return (double) Float.intBitsToFloat(s32());
        case 0xcb:
          pos++;
          return Double.longBitsToDouble(s64());
        default:
          throw err("unsupported msgpack type " + typeName(c));
      }
    }
  }

  // ------------------------------------------------------------------ encoder

  /** One encoding pass; not thread-safe, used by one call. */
  private static final class Encoder {
    private final MessagePacker p;
    private final EventSchema schema;

    Encoder(MessagePacker p, EventSchema schema) {
      this.p = p;
      this.schema = schema;
    }

    void batch(KvEventBatch b) throws IOException {
      p.packArrayHeader(schema.batchFields());
      p.packDouble(b.ts());
      p.packArrayHeader(b.events().size());
      for (KvEvent e : b.events()) {
        event(e);
      }
      if (schema.batchFields() == 3) {
        if (b.dataParallelRank() == null) {
          p.packNil();
        } else {
          p.packLong(b.dataParallelRank());
        }
      }
    }

    private void event(KvEvent e) throws IOException {
      Object[] fields;
      int declared;
      int required;
      String[] names;
      boolean stored = e instanceof KvEvent.BlockStored;
      if (stored) {
        KvEvent.BlockStored s = (KvEvent.BlockStored) e;
        fields =
            new Object[] {
              s.blockHashes(),
              s.parentBlockHash(),
              s.tokenIds(),
              s.blockSize(),
              s.loraId(),
              s.medium(),
              s.loraName(),
              s.extraKeys(),
              s.groupIdx(),
              s.kvCacheSpecKind(),
              s.kvCacheSpecSlidingWindow(),
              s.locality(),
              s.ownership(),
              s.sessionId()
            };
        declared = schema.storedFields();
        required = EventSchema.STORED_REQUIRED;
        names = EventSchema.STORED_FIELDS;
      } else if (e instanceof KvEvent.BlockRemoved) {
        KvEvent.BlockRemoved r = (KvEvent.BlockRemoved) e;
        fields =
            new Object[] {r.blockHashes(), r.medium(), r.groupIdx(), r.locality(), r.ownership()};
        declared = schema.removedFields();
        required = EventSchema.REMOVED_REQUIRED;
        names = EventSchema.REMOVED_FIELDS;
      } else {
        fields = new Object[0];
        declared = 0;
        required = 0;
        names = new String[0];
      }
      if (!schema.mapEvents()) {
        p.packArrayHeader(declared + 1);
        string(e.type());
        for (int i = 0; i < declared; i++) {
          field(stored, i, fields[i]);
        }
        return;
      }
      int count = 1;
      for (int i = 0; i < declared; i++) {
        if (i < required || fields[i] != null) {
          count++;
        }
      }
      if (declared + 1 >= 16 && count < 16) {
        // msgspec sizes the header from the declared field count and patches the count.
        p.writePayload(new byte[] {(byte) 0xde, 0, (byte) count});
      } else {
        p.packMapHeader(count);
      }
      string("type");
      string(e.type());
      for (int i = 0; i < declared; i++) {
        if (i < required || fields[i] != null) {
          string(names[i]);
          field(stored, i, fields[i]);
        }
      }
    }

    private void string(String s) throws IOException {
      byte[] b = s.getBytes(StandardCharsets.UTF_8);
      p.packRawStringHeader(b.length);
      p.writePayload(b);
    }

    private void hashes(EngineHashes h) throws IOException {
      p.packArrayHeader(h.size());
      for (int i = 0; i < h.size(); i++) {
        hash(h, i);
      }
    }

    private void hash(EngineHashes h, int i) throws IOException {
      byte[] raw = h.raw(i);
      long v = h.get(i);
      if (raw != null) {
        p.packBinaryHeader(raw.length);
        p.writePayload(raw);
      } else if (v >= 0 || h.signed()) {
        p.packLong(v);
      } else {
        byte[] b = new byte[9];
        b[0] = (byte) 0xcf;
        for (int k = 0; k < 8; k++) {
          b[1 + k] = (byte) (v >>> (56 - 8 * k));
        }
        p.writePayload(b);
      }
    }

    private void value(Object v) throws IOException {
      if (v == null) {
        p.packNil();
      } else if (v instanceof EngineHashes) {
        hashes((EngineHashes) v);
      } else if (v instanceof int[]) {
        int[] t = (int[]) v;
        p.packArrayHeader(t.length);
        for (int x : t) {
          p.packInt(x);
        }
      } else if (v instanceof String) {
        string((String) v);
      } else if (v instanceof Boolean) {
        p.packBoolean((Boolean) v);
      } else if (v instanceof BigInteger) {
        p.packBigInteger((BigInteger) v);
      } else if (v instanceof Double || v instanceof Float) {
        p.packDouble(((Number) v).doubleValue());
      } else if (v instanceof Long
          || v instanceof Integer
          || v instanceof Short
          || v instanceof Byte) {
        p.packLong(((Number) v).longValue());
      } else if (v instanceof byte[]) {
        byte[] b = (byte[]) v;
        p.packBinaryHeader(b.length);
        p.writePayload(b);
      } else if (v instanceof List) {
        List<?> l = (List<?>) v;
        p.packArrayHeader(l.size());
        for (Object o : l) {
          value(o);
        }
      } else if (v instanceof Map) {
        Map<?, ?> m = (Map<?, ?>) v;
        p.packMapHeader(m.size());
        for (Map.Entry<?, ?> en : m.entrySet()) {
          value(en.getKey());
          value(en.getValue());
        }
      } else {
        throw new IllegalArgumentException(
            "cannot encode a " + v.getClass().getName() + " as msgpack");
      }
    }

    private void field(boolean stored, int i, Object v) throws IOException {
      if (stored && i == F_PARENT && v != null) {
        hash((EngineHashes) v, 0); // parent_block_hash is one hash, not a list
      } else {
        value(v);
      }
    }
  }
}
