package io.kvroute.kvindex.event.internal;

import io.kvroute.kvindex.event.EngineHashes;
import io.kvroute.kvindex.event.KvEvent;
import java.math.BigDecimal;
import java.util.List;
import java.util.Map;

/** A tiny JSON writer for KV events (no dependency). Stateless; thread-safe. */
public final class Json {

  private static final char[] HEX = "0123456789abcdef".toCharArray();

  private Json() {}

  /** Appends {@code events} as a JSON array. */
  public static void events(StringBuilder sb, List<KvEvent> events) {
    sb.append('[');
    for (int i = 0; i < events.size(); i++) {
      if (i > 0) {
        sb.append(',');
      }
      event(sb, events.get(i));
    }
    sb.append(']');
  }

  /** Appends one event as a JSON object with vLLM's field names. */
  public static void event(StringBuilder sb, KvEvent e) {
    sb.append("{\"type\":");
    string(sb, e.type());
    if (e instanceof KvEvent.BlockStored) {
      KvEvent.BlockStored s = (KvEvent.BlockStored) e;
      hashes(sb, "block_hashes", s.blockHashes());
      sb.append(",\"parent_block_hash\":");
      if (s.parentBlockHash() == null) {
        sb.append("null");
      } else {
        sb.append('"').append(s.parentBlockHash().toUnsignedString(0)).append('"');
      }
      sb.append(",\"token_ids\":[");
      int[] t = s.tokenIds();
      for (int i = 0; i < t.length; i++) {
        if (i > 0) {
          sb.append(',');
        }
        sb.append(t[i]);
      }
      sb.append("],\"block_size\":").append(s.blockSize());
      field(sb, "lora_id", s.loraId());
      field(sb, "medium", s.medium());
      field(sb, "lora_name", s.loraName());
      field(sb, "extra_keys", s.extraKeys());
      field(sb, "group_idx", s.groupIdx());
      field(sb, "kv_cache_spec_kind", s.kvCacheSpecKind());
      field(sb, "kv_cache_spec_sliding_window", s.kvCacheSpecSlidingWindow());
      optional(sb, "locality", s.locality());
      optional(sb, "ownership", s.ownership());
      optional(sb, "session_id", s.sessionId());
    } else if (e instanceof KvEvent.BlockRemoved) {
      KvEvent.BlockRemoved r = (KvEvent.BlockRemoved) e;
      hashes(sb, "block_hashes", r.blockHashes());
      field(sb, "medium", r.medium());
      field(sb, "group_idx", r.groupIdx());
      optional(sb, "locality", r.locality());
      optional(sb, "ownership", r.ownership());
    }
    sb.append('}');
  }

  private static void hashes(StringBuilder sb, String name, EngineHashes h) {
    sb.append(",\"").append(name).append("\":[");
    for (int i = 0; i < h.size(); i++) {
      if (i > 0) {
        sb.append(',');
      }
      sb.append('"').append(h.toUnsignedString(i)).append('"');
    }
    sb.append(']');
    if (h.hasRaw()) {
      sb.append(",\"").append(name).append("_hex\":[");
      for (int i = 0; i < h.size(); i++) {
        if (i > 0) {
          sb.append(',');
        }
        byte[] raw = h.raw(i);
        if (raw == null) {
          sb.append("null");
        } else {
          hex(sb, raw);
        }
      }
      sb.append(']');
    }
  }

  private static void field(StringBuilder sb, String name, Object v) {
    sb.append(",\"").append(name).append("\":");
    value(sb, v);
  }

  private static void optional(StringBuilder sb, String name, Object v) {
    if (v != null) {
      field(sb, name, v);
    }
  }

  /** Appends a decoded msgpack value (null, Boolean, Number, String, byte[], List, Map). */
  public static void value(StringBuilder sb, Object v) {
    if (v == null) {
      sb.append("null");
    } else if (v instanceof String) {
      string(sb, (String) v);
    } else if (v instanceof Double || v instanceof Float) {
      number(sb, ((Number) v).doubleValue());
    } else if (v instanceof Number || v instanceof Boolean) {
      sb.append(v);
    } else if (v instanceof byte[]) {
      hex(sb, (byte[]) v);
    } else if (v instanceof List) {
      List<?> l = (List<?>) v;
      sb.append('[');
      for (int i = 0; i < l.size(); i++) {
        if (i > 0) {
          sb.append(',');
        }
        value(sb, l.get(i));
      }
      sb.append(']');
    } else if (v instanceof Map) {
      sb.append('{');
      boolean first = true;
      for (Map.Entry<?, ?> en : ((Map<?, ?>) v).entrySet()) {
        if (!first) {
          sb.append(',');
        }
        first = false;
        string(sb, String.valueOf(en.getKey()));
        sb.append(':');
        value(sb, en.getValue());
      }
      sb.append('}');
    } else {
      string(sb, v.toString());
    }
  }

  /** Appends a double as a plain JSON number ({@code null} if not finite). */
  public static void number(StringBuilder sb, double d) {
    if (Double.isNaN(d) || Double.isInfinite(d)) {
      sb.append("null");
    } else {
      sb.append(BigDecimal.valueOf(d).toPlainString());
    }
  }

  /** Appends a quoted, escaped JSON string. */
  public static void string(StringBuilder sb, String s) {
    sb.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"':
          sb.append("\\\"");
          break;
        case '\\':
          sb.append("\\\\");
          break;
        case '\n':
          sb.append("\\n");
          break;
        case '\r':
          sb.append("\\r");
          break;
        case '\t':
          sb.append("\\t");
          break;
        default:
          if (c < 0x20) {
            sb.append("\\u00").append(HEX[c >> 4]).append(HEX[c & 15]);
          } else {
            sb.append(c);
          }
      }
    }
    sb.append('"');
  }

  /** Appends bytes as a quoted lowercase hex string. */
  public static void hex(StringBuilder sb, byte[] b) {
    sb.append('"');
    for (byte x : b) {
      sb.append(HEX[(x >> 4) & 15]).append(HEX[x & 15]);
    }
    sb.append('"');
  }
}
