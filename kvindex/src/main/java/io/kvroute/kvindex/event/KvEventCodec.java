package io.kvroute.kvindex.event;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessageFormat;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessagePacker;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.ValueType;

/**
 * Decodes and encodes vLLM/SGLang {@code KVEventBatch} msgpack payloads (the third ZMQ frame).
 *
 * <p><b>Decoding</b> accepts every schema family of spec §1.6 and §4: the outer batch as {@code
 * [ts, events, dp_rank]}, the 2-element A0 form {@code [ts, events]} and, defensively, a map {@code
 * {"ts", "events", "data_parallel_rank"|"attn_dp_rank"}}; each event as a positional array (tag
 * first, any length ≥ the minimum, missing trailing fields are {@code None}, extra ones ignored) or
 * as a map tagged by {@code "type"} (fields looked up by name, unknown keys ignored), mixed freely
 * within a batch. Unknown tags are skipped and counted in {@link KvEventBatch#unknownEvents()}.
 * Hashes may be signed or unsigned 64-bit ints or bytes (see {@link EngineHashes}). Malformed input
 * raises {@link KvEventDecodeException} (with the byte offset) and nothing else; every length
 * prefix is checked against the remaining bytes before anything is allocated, and nesting is
 * limited to {@value #MAX_DEPTH} levels.
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
    } catch (IOException | RuntimeException | StackOverflowError e) {
      String what = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
      throw new KvEventDecodeException("malformed msgpack: " + what, d.pos(), e);
    } finally {
      d.close();
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

  /** One decoding pass; not thread-safe, used by one call. */
  private static final class Decoder {
    private final int length;
    private final Dialect dialect;
    private final MessageUnpacker u;
    private final byte[] scratch = new byte[64];
    private int scratchLen;

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
      this.length = length;
      this.dialect = dialect;
      this.u = MessagePack.newDefaultUnpacker(payload, offset, length);
    }

    long pos() {
      return u.getTotalReadBytes();
    }

    void close() {
      try {
        u.close();
      } catch (IOException ignored) {
        // an in-memory buffer cannot fail to close
      }
    }

    private KvEventDecodeException err(String message) {
      return new KvEventDecodeException(message, pos(), null);
    }

    private long remaining() {
      return length - pos();
    }

    private MessageFormat next() throws IOException {
      if (remaining() <= 0) {
        throw err("unexpected end of payload");
      }
      return u.getNextFormat();
    }

    private int arrayHeader(String what) throws IOException {
      MessageFormat f = next();
      if (f.getValueType() != ValueType.ARRAY) {
        throw err(what + " must be an array, was " + f.getValueType());
      }
      int n = u.unpackArrayHeader();
      if (n < 0 || n > remaining()) {
        throw err(what + " declares " + n + " elements but only " + remaining() + " bytes remain");
      }
      return n;
    }

    private int mapHeader(String what) throws IOException {
      int n = u.unpackMapHeader();
      if (n < 0 || 2L * n > remaining()) {
        throw err(what + " declares " + n + " entries but only " + remaining() + " bytes remain");
      }
      return n;
    }

    private int lengthChecked(int n, String what) {
      if (n < 0 || n > remaining()) {
        throw err(what + " declares " + n + " bytes but only " + remaining() + " remain");
      }
      return n;
    }

    /** Reads a str into scratch (returns false if longer than scratch: then it was skipped). */
    private boolean readKey(String what) throws IOException {
      MessageFormat f = next();
      if (f.getValueType() != ValueType.STRING) {
        throw err(what + " must be a string, was " + f.getValueType());
      }
      int n = lengthChecked(u.unpackRawStringHeader(), what);
      if (n > scratch.length) {
        u.readPayload(n);
        scratchLen = -1;
        return false;
      }
      u.readPayload(scratch, 0, n);
      scratchLen = n;
      return true;
    }

    private boolean keyIs(byte[] key) {
      if (scratchLen != key.length) {
        return false;
      }
      for (int i = 0; i < key.length; i++) {
        if (scratch[i] != key[i]) {
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

    KvEventBatch batch() throws IOException {
      MessageFormat f = next();
      double ts;
      List<KvEvent> events;
      Integer dp = null;
      int batchLen;
      if (f.getValueType() == ValueType.ARRAY) {
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
          skip();
        }
      } else if (f.getValueType() == ValueType.MAP) {
        int n = mapHeader("batch");
        batchLen = 3;
        Double tsSeen = null;
        events = null;
        for (int i = 0; i < n; i++) {
          int k = readKey("batch key") ? keyIndex(BATCH_KEYS) : -1;
          if (k == 0) {
            tsSeen = readDouble("ts");
          } else if (k == 1) {
            events = events();
          } else if (k == 2 || k == 3) {
            dp = readOptInt("data_parallel_rank");
          } else {
            skip();
          }
        }
        if (tsSeen == null || events == null) {
          throw err("map batch needs \"ts\" and \"events\"");
        }
        ts = tsSeen;
      } else {
        throw err("batch must be an array or a map, was " + f.getValueType());
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

    private List<KvEvent> events() throws IOException {
      int n = arrayHeader("events");
      List<KvEvent> out = new ArrayList<>(Math.min(n, 64));
      for (int i = 0; i < n; i++) {
        KvEvent e = event();
        if (e != null) {
          out.add(e);
        }
      }
      return out;
    }

    private int tag() throws IOException {
      if (!readKey("event tag")) {
        return TAG_UNKNOWN;
      }
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

    private KvEvent event() throws IOException {
      MessageFormat f = next();
      resetFields();
      int tag;
      if (f.getValueType() == ValueType.ARRAY) {
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
              skip();
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
              skip();
            }
          }
        } else {
          for (int p = 1; p < m; p++) {
            skip();
          }
        }
      } else if (f.getValueType() == ValueType.MAP) {
        sawMapEvent = true;
        int m = mapHeader("event");
        tag = -1;
        for (int i = 0; i < m; i++) {
          if (!readKey("event key")) {
            skip();
            continue;
          }
          if (keyIs(KEY_TYPE)) {
            tag = tag();
            continue;
          }
          int k = keyIndex(STORED_KEYS);
          if (k < 0) {
            skip();
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
        throw err("event must be an array or a map, was " + f.getValueType());
      }
      switch (tag) {
        case T_STORED:
          return new KvEvent.BlockStored(
              hashes,
              parent,
              tokens == null ? new int[0] : tokens,
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

    private void field(int id) throws IOException {
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
          extraKeys = readOptList("extra_keys");
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
          skip();
      }
    }

    private boolean nil() throws IOException {
      if (next() == MessageFormat.NIL) {
        u.unpackNil();
        return true;
      }
      return false;
    }

    private void skip() throws IOException {
      next();
      u.skipValue();
    }

    private EngineHashes readHashes() throws IOException {
      int n = arrayHeader("block_hashes");
      long[] values = new long[n];
      byte[][] raw = null;
      boolean signed = false;
      for (int i = 0; i < n; i++) {
        MessageFormat f = next();
        if (f.getValueType() == ValueType.BINARY) {
          int len = lengthChecked(u.unpackBinaryHeader(), "hash bytes");
          byte[] b = u.readPayload(len);
          if (raw == null) {
            raw = new byte[n][];
          }
          raw[i] = b;
          values[i] = EngineHashes.u64OfBytes(b);
        } else {
          values[i] = intHash(f);
          signed |= values[i] < 0 && f != MessageFormat.UINT64;
        }
      }
      return EngineHashes.of(values, raw, signed);
    }

    private EngineHashes readParent() throws IOException {
      MessageFormat f = next();
      if (f.getValueType() == ValueType.BINARY) {
        int len = lengthChecked(u.unpackBinaryHeader(), "hash bytes");
        byte[] b = u.readPayload(len);
        return EngineHashes.of(new long[] {EngineHashes.u64OfBytes(b)}, new byte[][] {b}, false);
      }
      long v = intHash(f);
      return EngineHashes.of(new long[] {v}, null, v < 0 && f != MessageFormat.UINT64);
    }

    private long intHash(MessageFormat f) throws IOException {
      if (f == MessageFormat.UINT64) {
        u.readPayload(scratch, 0, 9);
        long v = 0;
        for (int i = 1; i < 9; i++) {
          v = (v << 8) | (scratch[i] & 0xffL);
        }
        return v;
      }
      if (f.getValueType() != ValueType.INTEGER) {
        throw err("block hash must be an int or bytes, was " + f.getValueType());
      }
      return u.unpackLong();
    }

    private int[] readTokens() throws IOException {
      if (nil()) {
        return new int[0];
      }
      int n = arrayHeader("token_ids");
      int[] t = new int[n];
      for (int i = 0; i < n; i++) {
        long v = u.unpackLong();
        if (v < Integer.MIN_VALUE || v > Integer.MAX_VALUE) {
          throw err("token id out of int range: " + v);
        }
        t[i] = (int) v;
      }
      return t;
    }

    private double readDouble(String what) throws IOException {
      MessageFormat f = next();
      if (f.getValueType() == ValueType.FLOAT) {
        return u.unpackDouble();
      }
      if (f.getValueType() == ValueType.INTEGER && f != MessageFormat.UINT64) {
        return u.unpackLong();
      }
      throw err(what + " must be a number, was " + f.getValueType());
    }

    private Long readOptLong(String what) throws IOException {
      if (nil()) {
        return null;
      }
      MessageFormat f = next();
      if (f.getValueType() != ValueType.INTEGER || f == MessageFormat.UINT64) {
        throw err(what + " must be an int64, was " + f);
      }
      return u.unpackLong();
    }

    private Integer readOptInt(String what) throws IOException {
      Long v = readOptLong(what);
      if (v == null) {
        return null;
      }
      if (v < Integer.MIN_VALUE || v > Integer.MAX_VALUE) {
        throw err(what + " out of int range: " + v);
      }
      return v.intValue();
    }

    private String readOptString(String what) throws IOException {
      if (nil()) {
        return null;
      }
      MessageFormat f = next();
      if (f.getValueType() != ValueType.STRING) {
        throw err(what + " must be a string, was " + f.getValueType());
      }
      int n = lengthChecked(u.unpackRawStringHeader(), what);
      if (n <= scratch.length) {
        u.readPayload(scratch, 0, n);
        return internMedium(n);
      }
      return new String(u.readPayload(n), StandardCharsets.UTF_8);
    }

    /** Common short strings (media, cache-spec kinds) without allocating a new String. */
    private String internMedium(int n) {
      for (int i = 0; i < COMMON_STRINGS.length; i++) {
        scratchLen = n;
        if (keyIs(COMMON_STRING_BYTES[i])) {
          return COMMON_STRINGS[i];
        }
      }
      return new String(scratch, 0, n, StandardCharsets.UTF_8);
    }

    private List<Object> readOptList(String what) throws IOException {
      if (nil()) {
        return null;
      }
      if (next().getValueType() != ValueType.ARRAY) {
        throw err(what + " must be a list, was " + next().getValueType());
      }
      @SuppressWarnings("unchecked")
      List<Object> l = (List<Object>) value(0);
      return l;
    }

    /** A generic msgpack value. */
    private Object value(int depth) throws IOException {
      if (depth > MAX_DEPTH) {
        throw err("values nested deeper than " + MAX_DEPTH);
      }
      MessageFormat f = next();
      switch (f.getValueType()) {
        case NIL:
          u.unpackNil();
          return null;
        case BOOLEAN:
          return u.unpackBoolean();
        case INTEGER:
          if (f == MessageFormat.UINT64) {
            BigInteger b = u.unpackBigInteger();
            return b.bitLength() < 64 ? (Object) b.longValue() : b;
          }
          return u.unpackLong();
        case FLOAT:
          return u.unpackDouble();
        case STRING:
          {
            int n = lengthChecked(u.unpackRawStringHeader(), "string");
            return new String(u.readPayload(n), StandardCharsets.UTF_8);
          }
        case BINARY:
          {
            int n = lengthChecked(u.unpackBinaryHeader(), "bytes");
            return u.readPayload(n);
          }
        case ARRAY:
          {
            int n = arrayHeader("array");
            List<Object> l = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
              l.add(value(depth + 1));
            }
            return Collections.unmodifiableList(l);
          }
        case MAP:
          {
            int n = mapHeader("map");
            Map<Object, Object> m = new LinkedHashMap<>();
            for (int i = 0; i < n; i++) {
              Object k = value(depth + 1);
              m.put(k, value(depth + 1));
            }
            return Collections.unmodifiableMap(m);
          }
        default:
          throw err("unsupported msgpack type " + f.getValueType());
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
