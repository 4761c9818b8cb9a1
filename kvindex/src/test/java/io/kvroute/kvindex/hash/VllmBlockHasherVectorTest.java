package io.kvroute.kvindex.hash;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.kvindex.vectors.GoldenVectors;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

class VllmBlockHasherVectorTest {
  private static final HexFormat HEX = HexFormat.of();

  static int[] ints(JsonNode arr) {
    int[] t = new int[arr.size()];
    for (int i = 0; i < t.length; i++) {
      t[i] = arr.get(i).asInt();
    }
    return t;
  }

  /** Converts the vectors' JSON view of an extra-keys tuple to hasher values. */
  static Object extra(JsonNode n) {
    if (n == null || n.isNull()) {
      return null;
    }
    if (n.isTextual()) {
      return n.asText();
    }
    if (n.isIntegralNumber()) {
      return n.canConvertToLong() ? (Object) n.asLong() : n.bigIntegerValue();
    }
    if (n.isObject() && n.has("bytes_hex")) {
      return HEX.parseHex(n.get("bytes_hex").asText());
    }
    if (n.isArray()) {
      List<Object> l = new ArrayList<>();
      n.forEach(e -> l.add(extra(e)));
      return l;
    }
    throw new IllegalArgumentException("unexpected extra key " + n);
  }

  @TestFactory
  Stream<DynamicTest> noneHashTable() {
    JsonNode t = GoldenVectors.read("none_hash_table.json").get("none_hash");
    List<DynamicTest> tests = new ArrayList<>();
    for (Map.Entry<String, JsonNode> seed : t.properties()) {
      for (Map.Entry<String, JsonNode> alg : seed.getValue().properties()) {
        tests.add(
            DynamicTest.dynamicTest(
                "seed '" + seed.getKey() + "' " + alg.getKey(),
                () -> {
                  if (alg.getKey().equals("sha256_cbor_64bit_legacy_u64")) {
                    byte[] d =
                        VllmBlockHasher.noneHash(HashAlgorithm.SHA256_CBOR_64BIT, seed.getKey());
                    assertThat(Long.toUnsignedString(BlockHash.eventForm(d)))
                        .isEqualTo(alg.getValue().asText());
                  } else {
                    byte[] d =
                        VllmBlockHasher.noneHash(
                            HashAlgorithm.fromVllmName(alg.getKey()), seed.getKey());
                    assertThat(HEX.formatHex(d)).isEqualTo(alg.getValue().asText());
                  }
                }));
      }
    }
    return tests.stream();
  }

  @TestFactory
  Stream<DynamicTest> requestChains() {
    List<DynamicTest> tests = new ArrayList<>();
    for (String file :
        List.of(
            "hash_sha256_seed0.json",
            "hash_sha256_cbor_seed0.json",
            "hash_xxhash_seed0.json",
            "hash_xxhash_cbor_seed0.json",
            "hash_block_sizes_seed0.json",
            "hash_default_seed.json")) {
      JsonNode root = GoldenVectors.read(file);
      for (JsonNode c : root.get("cases")) {
        tests.add(
            DynamicTest.dynamicTest(
                file + " " + c.get("name").asText(),
                () -> {
                  HashAlgorithm alg = HashAlgorithm.fromVllmName(c.get("algorithm").asText());
                  VllmBlockHasher.Builder hb =
                      VllmBlockHasher.builder()
                          .algorithm(alg)
                          .blockSize(c.get("block_size").asInt());
                  if (!c.get("pythonhashseed").isNull()) {
                    hb.hashSeed(c.get("pythonhashseed").asText());
                  } // else: PYTHONHASHSEED unset, vLLM's default seed
                  VllmBlockHasher h = hb.build();
                  assertThat(HEX.formatHex(h.noneHash()))
                      .isEqualTo(c.get("none_hash_hex").asText());
                  BlockExtraKeys.Builder eb = BlockExtraKeys.builder();
                  if (!c.get("lora_name").isNull()) {
                    eb.loraName(c.get("lora_name").asText());
                  }
                  if (!c.get("cache_salt").isNull()) {
                    eb.cacheSalt(c.get("cache_salt").asText());
                  }
                  BlockExtraKeys extras = eb.build();
                  int[] tokens = ints(c.get("token_ids"));
                  List<BlockHash> got = h.hashBlocks(tokens, extras);
                  JsonNode blocks = c.get("blocks");
                  assertThat(got).hasSize(blocks.size());
                  for (int i = 0; i < blocks.size(); i++) {
                    JsonNode b = blocks.get(i);
                    int from = b.get("token_range").get(0).asInt();
                    int to = b.get("token_range").get(1).asInt();
                    byte[] parent = HEX.parseHex(b.get("parent_hex").asText());
                    assertThat(extra(b.get("extra_keys"))).isEqualTo(extras.forBlock(from, to));
                    assertThat(
                            HEX.formatHex(
                                h.preimage(parent, tokens, from, to, extras.forBlock(from, to))))
                        .as("preimage of block %d", i)
                        .isEqualTo(b.get("preimage_hex").asText());
                    assertThat(got.get(i).hex()).isEqualTo(b.get("digest_hex").asText());
                    assertThat(got.get(i).u64String()).isEqualTo(b.get("event_int_u64").asText());
                  }
                }));
      }
    }
    return tests.stream();
  }

  @TestFactory
  Stream<DynamicTest> directBlockHashes() {
    JsonNode root = GoldenVectors.read("hash_block_tokens_direct_seed0.json");
    int[] tokens = ints(root.get("token_ids"));
    String seed = root.get("pythonhashseed").asText();
    List<DynamicTest> tests = new ArrayList<>();
    for (Map.Entry<String, JsonNode> e : root.get("algorithms").properties()) {
      HashAlgorithm alg = HashAlgorithm.fromVllmName(e.getKey());
      for (JsonNode c : e.getValue().get("cases")) {
        tests.add(
            DynamicTest.dynamicTest(
                e.getKey() + " " + c.get("name").asText() + " parent " + c.get("parent").asText(),
                () -> {
                  VllmBlockHasher h =
                      VllmBlockHasher.builder()
                          .algorithm(alg)
                          .blockSize(tokens.length)
                          .hashSeed(seed)
                          .build();
                  String p = c.get("parent").asText();
                  byte[] parent = p.equals("NONE_HASH") ? null : HEX.parseHex(p);
                  List<?> extra = (List<?>) extra(c.get("extra_keys"));
                  assertThat(HEX.formatHex(h.preimage(parent, tokens, 0, tokens.length, extra)))
                      .isEqualTo(c.get("preimage_hex").asText());
                  BlockHash got = h.hashBlock(parent, tokens, 0, tokens.length, extra);
                  assertThat(got.hex()).isEqualTo(c.get("digest_hex").asText());
                  assertThat(got.u64String()).isEqualTo(c.get("event_int_u64").asText());
                }));
      }
    }
    return tests.stream();
  }

  /** Token ids and extra keys of the large cases, given by their generating rule in the file. */
  private static int[] shapeTokens(JsonNode c) {
    if (c.has("token_ids")) {
      return ints(c.get("token_ids"));
    }
    String name = c.get("name").asText();
    int n =
        switch (name) {
          case "big_block_frames" -> 20_000;
          case "frame_split_at_last_token" -> 13_100;
          case "frame_split_inside_extra" -> 13_000;
          default -> throw new IllegalArgumentException("no token rule for " + name);
        };
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = 100_000 + (i % 1000); // [100000 + (i % 1000) for i in range(n)]
    }
    return t;
  }

  private static Object shapeExtra(JsonNode c) {
    if (c.has("extra_keys")) {
      return extra(c.get("extra_keys"));
    }
    String name = c.get("name").asText();
    switch (name) {
      case "big_bytes_unframed":
        {
          byte[] b = new byte[70_000];
          for (int i = 0; i < b.length; i++) {
            b[i] = (byte) (i * 7); // bytes((i * 7) & 0xFF for i in range(70000))
          }
          return List.of(b);
        }
      case "big_str_unframed":
        {
          StringBuilder sb = new StringBuilder(70_000);
          for (int i = 0; i < 70_000; i++) {
            sb.append((char) (0x61 + i % 26)); // ''.join(chr(0x61 + i % 26) ...)
          }
          return List.of(sb.toString());
        }
      case "frame_split_inside_extra":
        {
          List<Object> l = new ArrayList<>();
          for (int k = 0; k < 8; k++) {
            l.add(String.valueOf((char) (0x41 + k)).repeat(100));
          }
          return l;
        }
      default:
        throw new IllegalArgumentException("no extra-keys rule for " + name);
    }
  }

  /**
   * Every value shape CPython's pickle (and cbor2) meet in vLLM keys: token tuples of 0-5 items,
   * extra-key tuples of 0-4 items and nested, ints of every width, str/bytes at the size
   * boundaries, repeated singletons (memo references), and pre-images over the 64 KiB frame size.
   */
  @TestFactory
  Stream<DynamicTest> pickleAndCborValueShapes() {
    JsonNode root = GoldenVectors.read("pickle_value_shapes_seed0.json");
    List<DynamicTest> tests = new ArrayList<>();
    for (JsonNode c : root.get("cases")) {
      for (Map.Entry<String, JsonNode> r : c.get("results").properties()) {
        tests.add(
            DynamicTest.dynamicTest(
                r.getKey() + " " + c.get("name").asText(),
                () -> {
                  HashAlgorithm alg = HashAlgorithm.fromVllmName(r.getKey());
                  VllmBlockHasher h =
                      VllmBlockHasher.builder().algorithm(alg).hashSeed("0").build();
                  assertThat(HEX.formatHex(h.noneHash()))
                      .isEqualTo(root.get("none_hash_hex").get(r.getKey()).asText());
                  int[] tokens = shapeTokens(c);
                  List<?> extra = (List<?>) shapeExtra(c);
                  JsonNode want = r.getValue();
                  byte[] pre = h.preimage(null, tokens, 0, tokens.length, extra);
                  if (want.has("preimage_hex")) {
                    assertThat(HEX.formatHex(pre)).isEqualTo(want.get("preimage_hex").asText());
                  }
                  assertThat(pre.length).isEqualTo(want.get("preimage_len").asInt());
                  assertThat(
                          HEX.formatHex(
                              java.security.MessageDigest.getInstance("SHA-256").digest(pre)))
                      .isEqualTo(want.get("preimage_sha256").asText());
                  BlockHash got = h.hashBlock(null, tokens, 0, tokens.length, extra);
                  assertThat(got.hex()).isEqualTo(want.get("digest_hex").asText());
                  assertThat(got.u64String()).isEqualTo(want.get("event_int_u64").asText());
                }));
      }
    }
    return tests.stream();
  }

  @TestFactory
  Stream<DynamicTest> legacy64BitChain() {
    JsonNode root = GoldenVectors.read("hash_legacy_sha256_cbor_64bit_seed0.json");
    List<DynamicTest> tests = new ArrayList<>();
    for (JsonNode c : root.get("cases")) {
      tests.add(
          DynamicTest.dynamicTest(
              c.get("name").asText(),
              () -> {
                VllmBlockHasher h =
                    VllmBlockHasher.builder()
                        .algorithm(HashAlgorithm.SHA256_CBOR_64BIT)
                        .blockSize(c.get("block_size").asInt())
                        .hashSeed(c.get("pythonhashseed").asText())
                        .build();
                assertThat(Long.toUnsignedString(BlockHash.eventForm(h.noneHash())))
                    .isEqualTo(c.get("none_hash_u64").asText());
                List<BlockHash> got = h.hashBlocks(ints(c.get("token_ids")));
                JsonNode blocks = c.get("blocks");
                assertThat(got).hasSize(blocks.size());
                for (int i = 0; i < blocks.size(); i++) {
                  assertThat(got.get(i).u64String())
                      .isEqualTo(blocks.get(i).get("hash_u64").asText());
                }
              }));
    }
    return tests.stream();
  }
}
