package io.kvroute.kvindex.event;

import static io.kvroute.kvindex.vectors.GoldenVectors.hex;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvroute.kvindex.vectors.GoldenVectors;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** Every vector of {@code kv_events_msgpack.json} decodes to its view and re-encodes exactly. */
class KvEventCodecVectorTest {

  static Stream<Arguments> vectors() {
    JsonNode root = GoldenVectors.read("kv_events_msgpack.json");
    List<Arguments> out = new ArrayList<>();
    for (JsonNode v : root.get("vectors")) {
      out.add(Arguments.of(v.get("name").asText(), v));
    }
    assertThat(out).isNotEmpty();
    return out.stream();
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("vectors")
  void decodesToViewAndReencodesByteExact(String name, JsonNode v) {
    byte[] payload = hex(v.get("payload_hex").asText());
    KvEventBatch batch =
        KvEventCodec.decode(
            payload,
            0,
            payload.length,
            name.startsWith("SGLANG") ? KvEventCodec.Dialect.SGLANG : KvEventCodec.Dialect.VLLM);

    String schema = v.get("schema").asText();
    EventSchema expectedSchema =
        schema.startsWith("SGLANG") ? EventSchema.A0_DP : EventSchema.valueOf(schema);
    assertThat(batch.schema()).as("detected schema").isEqualTo(expectedSchema);

    Object expected = norm(new ObjectMapper().convertValue(v.get("decoded"), Object.class));
    assertThat(view(batch)).as("decoded view").isEqualTo(expected);

    assertThat(hex(KvEventCodec.encode(batch)))
        .as("re-encoded")
        .isEqualTo(v.get("payload_hex").asText());

    // the frames of the vector: topic, seq (8 bytes big-endian), payload
    JsonNode frames = v.get("zmq_frames_hex");
    assertThat(new String(hex(frames.get(0).asText()), java.nio.charset.StandardCharsets.UTF_8))
        .isEqualTo(v.get("topic").asText());
    assertThat(new BigInteger(frames.get(1).asText(), 16).longValue())
        .isEqualTo(v.get("seq").asLong());
    assertThat(frames.get(2).asText()).isEqualTo(v.get("payload_hex").asText());
  }

  /** The vector file's JSON view of a batch, rebuilt from the model following the schema. */
  static Object view(KvEventBatch b) {
    EventSchema s = b.schema();
    List<Object> out = new ArrayList<>();
    out.add(b.ts());
    List<Object> events = new ArrayList<>();
    for (KvEvent e : b.events()) {
      Object[] fields;
      String[] names;
      int declared;
      int required;
      if (e instanceof KvEvent.BlockStored) {
        KvEvent.BlockStored st = (KvEvent.BlockStored) e;
        fields =
            new Object[] {
              hashes(st.blockHashes()),
              st.parentBlockHash() == null ? null : hash(st.parentBlockHash(), 0),
              ints(st.tokenIds()),
              st.blockSize(),
              st.loraId(),
              st.medium(),
              st.loraName(),
              st.extraKeys(),
              st.groupIdx(),
              st.kvCacheSpecKind(),
              st.kvCacheSpecSlidingWindow(),
              st.locality(),
              st.ownership(),
              st.sessionId()
            };
        names = EventSchema.STORED_FIELDS;
        declared = s.storedFields();
        required = EventSchema.STORED_REQUIRED;
      } else if (e instanceof KvEvent.BlockRemoved) {
        KvEvent.BlockRemoved r = (KvEvent.BlockRemoved) e;
        fields =
            new Object[] {
              hashes(r.blockHashes()), r.medium(), r.groupIdx(), r.locality(), r.ownership()
            };
        names = EventSchema.REMOVED_FIELDS;
        declared = s.removedFields();
        required = EventSchema.REMOVED_REQUIRED;
      } else {
        fields = new Object[0];
        names = new String[0];
        declared = 0;
        required = 0;
      }
      if (s.mapEvents()) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("type", e.type());
        for (int i = 0; i < declared; i++) {
          if (i < required || fields[i] != null) {
            m.put(names[i], norm(fields[i]));
          }
        }
        events.add(m);
      } else {
        List<Object> a = new ArrayList<>();
        a.add(e.type());
        for (int i = 0; i < declared; i++) {
          a.add(norm(fields[i]));
        }
        events.add(a);
      }
    }
    out.add(events);
    if (s.batchFields() == 3) {
      out.add(norm(b.dataParallelRank()));
    }
    return out;
  }

  private static List<Object> hashes(EngineHashes h) {
    List<Object> l = new ArrayList<>();
    for (int i = 0; i < h.size(); i++) {
      l.add(hash(h, i));
    }
    return l;
  }

  private static Object hash(EngineHashes h, int i) {
    if (h.raw(i) != null) {
      return "hex:" + hex(h.raw(i));
    }
    return h.signed()
        ? BigInteger.valueOf(h.get(i))
        : new BigInteger(Long.toUnsignedString(h.get(i)));
  }

  private static List<Object> ints(int[] t) {
    List<Object> l = new ArrayList<>();
    for (int x : t) {
      l.add(BigInteger.valueOf(x));
    }
    return l;
  }

  /** Normalises JSON-ish trees: integral numbers to BigInteger, hash wrappers unwrapped. */
  static Object norm(Object o) {
    if (o instanceof Map) {
      Map<?, ?> m = (Map<?, ?>) o;
      if (m.size() == 1 && m.containsKey("int")) {
        return new BigInteger(m.get("int").toString());
      }
      if (m.size() == 1 && m.containsKey("bytes_hex")) {
        return "hex:" + m.get("bytes_hex");
      }
      Map<Object, Object> out = new LinkedHashMap<>();
      m.forEach((k, v) -> out.put(k, norm(v)));
      return out;
    }
    if (o instanceof List) {
      List<Object> out = new ArrayList<>();
      for (Object x : (List<?>) o) {
        out.add(norm(x));
      }
      return out;
    }
    if (o instanceof Integer || o instanceof Long || o instanceof Short) {
      return BigInteger.valueOf(((Number) o).longValue());
    }
    if (o instanceof Float) {
      return ((Float) o).doubleValue();
    }
    if (o instanceof byte[]) {
      return "hex:" + hex((byte[]) o);
    }
    return o;
  }
}
