package io.kvroute.connector.p2pnccl;

import io.kvroute.connector.Endpoint;
import java.io.IOException;
import org.msgpack.core.MessageFormat;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.ValueType;

/**
 * One instance's registration, decoded: the msgpack map {@code {"type": "P" | "D", "http_address":
 * "host:port", "zmq_address": "host:port"}} that vLLM's {@code P2pNcclEngine.ping} sends.
 *
 * @param role {@code PREFILL} for {@code "P"}, {@code DECODE} for {@code "D"}
 * @param httpText {@code http_address} as sent
 * @param http {@code http_address} parsed
 * @param kvText {@code zmq_address} as sent
 * @param kv {@code zmq_address} parsed
 */
record Registration(
    Endpoint.Role role, String httpText, KvAddress http, String kvText, KvAddress kv) {

  /** A message that is not a registration: what is wrong with it. */
  static final class Malformed extends Exception {
    private static final long serialVersionUID = 1L;

    Malformed(String message) {
      super(message, null, false, false);
    }
  }

  /**
   * Decodes one registration.
   *
   * @throws Malformed naming what is wrong
   */
  static Registration decode(byte[] payload) throws Malformed {
    String type = null;
    String http = null;
    String kv = null;
    try (MessageUnpacker u = MessagePack.newDefaultUnpacker(payload)) {
      if (!u.hasNext() || u.getNextFormat().getValueType() != ValueType.MAP) {
        throw new Malformed("a message that is not a msgpack map");
      }
      int n = u.unpackMapHeader();
      if (n > P2pNcclRegistry.MAX_KEYS) {
        throw new Malformed("a map of " + n + " keys");
      }
      for (int i = 0; i < n; i++) {
        if (u.getNextFormat().getValueType() != ValueType.STRING) {
          throw new Malformed("a map key that is not a string");
        }
        String key = u.unpackString();
        switch (key) {
          case "type" -> type = string(u, key);
          case "http_address" -> http = string(u, key);
          case "zmq_address" -> kv = string(u, key);
          default -> u.skipValue(); // a field a later vLLM may add
        }
      }
      if (u.hasNext()) {
        throw new Malformed("bytes after the map");
      }
    } catch (IOException | RuntimeException e) {
      throw new Malformed("a message that is not valid msgpack (" + e.getMessage() + ")");
    }
    if (type == null || http == null || kv == null) {
      throw new Malformed(
          "a map without "
              + (type == null ? "type" : http == null ? "http_address" : "zmq_address"));
    }
    Endpoint.Role role;
    if (type.equals("P")) {
      role = Endpoint.Role.PREFILL;
    } else if (type.equals("D")) {
      role = Endpoint.Role.DECODE;
    } else {
      throw new Malformed("type \"" + printable(type) + "\" (not P or D)");
    }
    String httpText = http;
    String kvText = kv;
    KvAddress h =
        KvAddress.parse(httpText)
            .orElseThrow(() -> new Malformed("http_address \"" + printable(httpText) + "\""));
    KvAddress k =
        KvAddress.parse(kvText)
            .orElseThrow(() -> new Malformed("zmq_address \"" + printable(kvText) + "\""));
    return new Registration(role, httpText.trim(), h, kvText.trim(), k);
  }

  private static String string(MessageUnpacker u, String key) throws IOException, Malformed {
    MessageFormat f = u.getNextFormat();
    if (f.getValueType() != ValueType.STRING) {
      throw new Malformed(key + " is not a string");
    }
    return u.unpackString();
  }

  /** At most 80 characters, control characters as {@code ?} (for logs). */
  static String printable(String s) {
    String t = s.length() > 80 ? s.substring(0, 80) + "..." : s;
    StringBuilder b = new StringBuilder(t.length());
    for (int i = 0; i < t.length(); i++) {
      char c = t.charAt(i);
      b.append(c < ' ' || c == 127 ? '?' : c);
    }
    return b.toString();
  }
}
