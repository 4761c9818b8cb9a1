package io.kvroute.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.hash.BlockExtraKeys;
import io.kvroute.kvindex.hash.HashAlgorithm;
import io.kvroute.kvindex.hash.VllmBlockHasher;
import io.kvroute.testkit.internal.BlockPool;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** BlockStored hashes equal vLLM's for the same tokens, algorithm and seed. */
class HashVectorTest {

  private static int[] ints(JsonNode arr) {
    int[] t = new int[arr.size()];
    for (int i = 0; i < t.length; i++) {
      t[i] = arr.get(i).asInt();
    }
    return t;
  }

  private static List<Long> expected(JsonNode c) {
    List<Long> out = new ArrayList<>();
    for (JsonNode b : c.get("blocks")) {
      JsonNode v = b.has("event_int_u64") ? b.get("event_int_u64") : b.get("hash_u64");
      out.add(Long.parseUnsignedLong(v.asText()));
    }
    return out;
  }

  @ParameterizedTest
  @CsvSource({
    "hash_sha256_seed0.json, SHA256",
    "hash_sha256_cbor_seed0.json, SHA256_CBOR",
    "hash_xxhash_seed0.json, XXHASH",
    "hash_xxhash_cbor_seed0.json, XXHASH_CBOR",
    "hash_legacy_sha256_cbor_64bit_seed0.json, SHA256_CBOR_64BIT"
  })
  void blockPoolEmitsVllmHashesForEveryVector(String file, HashAlgorithm algo) {
    JsonNode doc = TestSupport.vectors(file);
    for (JsonNode c : doc.get("cases")) {
      int bs = c.get("block_size").asInt();
      VllmBlockHasher hasher =
          VllmBlockHasher.builder()
              .algorithm(algo)
              .blockSize(bs)
              .hashSeed(c.get("pythonhashseed").asText())
              .build();
      List<KvEvent> events = new ArrayList<>();
      BlockPool pool = new BlockPool(64, 0, hasher, events::addAll);
      String lora = c.path("lora_name").isTextual() ? c.get("lora_name").asText() : null;
      String salt = c.path("cache_salt").isTextual() ? c.get("cache_salt").asText() : null;
      BlockExtraKeys extras = BlockExtraKeys.builder().loraName(lora).cacheSalt(salt).build();
      int[] tokens = ints(c.get("token_ids"));
      BlockPool.Seq seq = new BlockPool.Seq(tokens, extras, lora == null ? null : 1L, lora);
      BlockPool.Hit hit = pool.lookup(seq);
      assertThat(pool.allocate(seq, hit.gpuTokens(), tokens.length + 1)).isTrue();
      pool.cacheFullBlocks(seq, tokens.length);
      List<Long> got = new ArrayList<>();
      for (KvEvent e : events) {
        if (e instanceof KvEvent.BlockStored s) {
          for (long h : s.blockHashes().values()) {
            got.add(h);
          }
          assertThat(s.loraName()).isEqualTo(lora);
          assertThat(s.parentBlockHash()).isNull();
          assertThat(s.blockSize()).isEqualTo(bs);
        }
      }
      assertThat(got).as("%s %s", file, c.get("name").asText()).isEqualTo(expected(c));
    }
  }

  @Test
  void emittedOverZmqForRequestsMatchSha256Vectors() throws Exception {
    JsonNode doc = TestSupport.vectors("hash_sha256_seed0.json");
    for (int bs : new int[] {16, 64}) {
      try (VllmSimulator sim =
              TestSupport.sim()
                  .blockSize(bs)
                  .gpuBlocks(64)
                  .loras(List.of("my-lora"))
                  .hashSeed("0")
                  .build()
                  .start();
          TestSupport.Sub sub = new TestSupport.Sub(sim)) {
        for (JsonNode c : doc.get("cases")) {
          if (c.get("block_size").asInt() != bs) {
            continue;
          }
          sim.resetPrefixCache();
          Map<String, Object> body = new java.util.LinkedHashMap<>();
          body.put("model", c.path("lora_name").isTextual() ? "my-lora" : "sim-model");
          body.put("prompt", ints(c.get("token_ids")));
          body.put("max_tokens", 1);
          if (c.path("cache_salt").isTextual()) {
            body.put("cache_salt", c.get("cache_salt").asText());
          }
          var resp =
              TestSupport.post(sim, "/v1/completions", TestSupport.JSON.writeValueAsString(body));
          assertThat(resp.statusCode()).isEqualTo(200);
          List<Long> expected = expected(c);
          List<Long> got = new ArrayList<>();
          boolean cleared = false;
          while (got.size() < expected.size()) {
            KvEventBatch batch = sub.expect().batch();
            for (KvEvent e : batch.events()) {
              if (e instanceof KvEvent.AllBlocksCleared) {
                cleared = true;
                got.clear();
              } else if (cleared && e instanceof KvEvent.BlockStored s) {
                for (long h : s.blockHashes().values()) {
                  got.add(h);
                }
              }
            }
          }
          assertThat(got).as(c.get("name").asText()).isEqualTo(expected);
          assertThat(sim.cachedBlockHashes()).containsExactlyInAnyOrderElementsOf(expected);
        }
      }
    }
  }
}
