package io.kvroute.kvindex.parity;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.kvindex.event.EngineHashes;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.hash.BlockExtraKeys;
import io.kvroute.kvindex.hash.HashAlgorithm;
import io.kvroute.kvindex.parity.ParityDiagnosis.Cause;
import io.kvroute.kvindex.vectors.GoldenVectors;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@link ParityCheck} against block hashes produced by vLLM's own code (the golden vectors): the
 * engine's side of every case is a vector, never kvroute's own hasher.
 */
class ParityCheckTest {

  /** One request chain of a vector file: what a vLLM engine with these settings publishes. */
  record Vector(
      HashSettings settings, int[] tokens, long[] hashes, String lora, String salt, String name) {

    static Vector of(String file, String name, String algorithm) {
      for (JsonNode c : GoldenVectors.read(file).get("cases")) {
        if (c.get("name").asText().equals(name)
            && (algorithm == null || c.get("algorithm").asText().equals(algorithm))) {
          JsonNode blocks = c.get("blocks");
          long[] hashes = new long[blocks.size()];
          for (int i = 0; i < hashes.length; i++) {
            hashes[i] = Long.parseUnsignedLong(blocks.get(i).get("event_int_u64").asText());
          }
          JsonNode t = c.get("token_ids");
          int[] tokens = new int[t.size()];
          for (int i = 0; i < tokens.length; i++) {
            tokens[i] = t.get(i).asInt();
          }
          JsonNode seed = c.get("pythonhashseed");
          return new Vector(
              HashSettings.of(
                  HashAlgorithm.fromVllmName(c.get("algorithm").asText()),
                  c.get("block_size").asInt(),
                  seed.isNull() ? null : seed.asText()),
              tokens,
              hashes,
              c.get("lora_name").isNull() ? null : c.get("lora_name").asText(),
              c.get("cache_salt").isNull() ? null : c.get("cache_salt").asText(),
              file + " " + name);
        }
      }
      throw new IllegalArgumentException("no case " + name + " in " + file);
    }

    static Vector of(String file, String name) {
      return of(file, name, null);
    }

    BlockExtraKeys extras() {
      return BlockExtraKeys.builder().loraName(lora).cacheSalt(salt).build();
    }

    /** The engine's BlockStored event for the whole chain (a root event, as vLLM sends it). */
    KvEvent.BlockStored event() {
      int n = hashes.length * settings.blockSize();
      KvEvent.BlockStored.Builder b =
          KvEvent.BlockStored.builder()
              .blockHashes(EngineHashes.ofInts(hashes))
              .tokenIds(Arrays.copyOf(tokens, n))
              .blockSize(settings.blockSize());
      if (lora != null) {
        b.loraName(lora);
      }
      BlockExtraKeys extras = extras();
      if (!extras.isEmpty()) {
        java.util.List<Object> keys = new java.util.ArrayList<>();
        for (int i = 0; i < hashes.length; i++) {
          keys.add(extras.forBlock(i * settings.blockSize(), (i + 1) * settings.blockSize()));
        }
        b.extraKeys(keys);
      }
      return b.build();
    }
  }

  private static final String SHA256 = "hash_sha256_seed0.json";
  private static final String SHA256_CBOR = "hash_sha256_cbor_seed0.json";
  private static final String XXHASH = "hash_xxhash_seed0.json";
  private static final String XXHASH_CBOR = "hash_xxhash_cbor_seed0.json";
  private static final String DEFAULT_SEED = "hash_default_seed.json";

  private static ParityEvidence.Builder observed(Vector engine) {
    return ParityEvidence.builder()
        .observedHashes(engine.hashes())
        .observedBlockSize(engine.settings().blockSize());
  }

  @Test
  void expectedHashesAreVllmsForEveryAlgorithmAndExtraKeys() {
    for (String file : List.of(SHA256, SHA256_CBOR, XXHASH, XXHASH_CBOR)) {
      for (String name :
          List.of(
              "bs16_5blocks_plus_partial7",
              "bs16_3blocks_lora_salt",
              "bs64_3blocks_salt",
              "bs16_partial_only")) {
        Vector v = Vector.of(file, name);
        assertThat(ParityCheck.of(v.settings()).expectedHashes(v.tokens(), v.extras()))
            .as(v.name())
            .containsExactly(v.hashes());
      }
    }
    for (String alg : List.of("sha256", "sha256_cbor")) {
      Vector v = Vector.of(DEFAULT_SEED, "bs16_lora_salt", alg);
      assertThat(v.settings().pythonHashSeed()).isEmpty();
      assertThat(ParityCheck.of(v.settings()).expectedHashes(v.tokens(), v.extras()))
          .containsExactly(v.hashes());
    }
  }

  @Test
  void theRightSettingsMatch() {
    Vector v = Vector.of(SHA256_CBOR, "bs16_5blocks_plus_partial7");
    ParityDiagnosis d =
        ParityCheck.of(v.settings()).diagnose(observed(v).promptTokens(v.tokens()).build());
    assertThat(d.cause()).isEqualTo(Cause.MATCH);
    assertThat(d.matches()).isTrue();
    assertThat(d.findings()).isEmpty();
    assertThat(d.predictedBlocks()).isEqualTo(5);
    assertThat(d.matchedBlocks()).isEqualTo(5);
    assertThat(d.ratio()).isEqualTo(1.0);
    assertThat(d.engineBlockSize()).hasValue(16);
    assertThat(d.message()).contains("all 5 predicted block hash(es)");
    assertThat(d.fix()).isEqualTo("none needed");
    // vLLM's defaults, PYTHONHASHSEED unset (the seed "vllm-none-hash")
    Vector def = Vector.of(DEFAULT_SEED, "bs16_plain", "sha256");
    assertThat(
            ParityCheck.of(HashSettings.vllmDefaults())
                .diagnose(observed(def).promptTokens(def.tokens()).build())
                .cause())
        .isEqualTo(Cause.MATCH);
  }

  @Test
  void anotherBlockSizeIsNamedFromTheEvents() {
    Vector engine = Vector.of(SHA256_CBOR, "bs64_3blocks");
    HashSettings configured = HashSettings.of(HashAlgorithm.SHA256_CBOR, 16, "0");
    ParityDiagnosis d =
        ParityCheck.of(configured)
            .diagnose(
                ParityEvidence.builder()
                    .promptTokens(engine.tokens())
                    .storedEvent(engine.event())
                    .build());
    assertThat(d.cause()).isEqualTo(Cause.BLOCK_SIZE);
    assertThat(d.engineBlockSize()).hasValue(64);
    assertThat(d.findings())
        .extracting(ParityDiagnosis.Finding::cause)
        .containsExactly(Cause.BLOCK_SIZE);
    assertThat(d.message()).contains("block_size 64").contains("configured with 16");
    assertThat(d.fix()).contains("64").contains("--block-size 16");
    // its hashing is the configured one, at the engine's block size
    assertThat(d.engineSettings()).hasValue(configured.withBlockSize(64));
    assertThat(d.matchedBlocks()).isZero();
  }

  @Test
  void anotherAlgorithmIsNamed() {
    Vector engine = Vector.of(SHA256_CBOR, "bs16_4blocks");
    ParityDiagnosis d =
        ParityCheck.of(HashSettings.of(HashAlgorithm.SHA256, 16, "0"))
            .diagnose(observed(engine).promptTokens(engine.tokens()).build());
    assertThat(d.cause()).isEqualTo(Cause.HASH_ALGORITHM);
    assertThat(d.engineSettings()).hasValue(engine.settings());
    assertThat(d.message()).contains("sha256_cbor");
    assertThat(d.fix()).contains("--prefix-caching-hash-algo sha256").contains("sha256_cbor");
    // and the xxhash family
    Vector xx = Vector.of(XXHASH_CBOR, "bs16_4blocks");
    ParityDiagnosis dx =
        ParityCheck.of(HashSettings.of(HashAlgorithm.SHA256_CBOR, 16, "0"))
            .diagnose(observed(xx).promptTokens(xx.tokens()).build());
    assertThat(dx.cause()).isEqualTo(Cause.HASH_ALGORITHM);
    assertThat(dx.engineSettings().orElseThrow().algorithm()).isEqualTo(HashAlgorithm.XXHASH_CBOR);
  }

  @Test
  void anotherSeedIsNamed() {
    // kvroute expects a default vLLM (PYTHONHASHSEED unset); the engine runs with PYTHONHASHSEED=0
    Vector engine = Vector.of(SHA256_CBOR, "bs16_3blocks");
    ParityDiagnosis d =
        ParityCheck.of(HashSettings.of(HashAlgorithm.SHA256_CBOR, 16, null))
            .diagnose(observed(engine).promptTokens(engine.tokens()).build());
    assertThat(d.cause()).isEqualTo(Cause.HASH_SEED);
    assertThat(d.engineSettings().orElseThrow().pythonHashSeed()).hasValue("0");
    assertThat(d.message()).contains("PYTHONHASHSEED=0").contains("PYTHONHASHSEED unset");
    // the other way round, from the default-seed vectors
    Vector def = Vector.of(DEFAULT_SEED, "bs16_plain", "sha256_cbor");
    ParityDiagnosis back =
        ParityCheck.of(HashSettings.of(HashAlgorithm.SHA256_CBOR, 16, "0"))
            .diagnose(observed(def).promptTokens(def.tokens()).build());
    assertThat(back.cause()).isEqualTo(Cause.HASH_SEED);
    assertThat(back.engineSettings().orElseThrow().pythonHashSeed()).isEmpty();
    // a seed outside the defaults is found when listed
    assertThat(
            ParityCheck.builder(HashSettings.of(HashAlgorithm.SHA256_CBOR, 16, "0"))
                .candidateSeeds(List.of())
                .build()
                .candidateSeeds())
        .isEmpty();
  }

  @Test
  void algorithmAndSeedTogether() {
    Vector engine = Vector.of(XXHASH, "bs16_2blocks");
    ParityDiagnosis d =
        ParityCheck.of(HashSettings.vllmDefaults())
            .diagnose(observed(engine).promptTokens(engine.tokens()).build());
    assertThat(d.cause()).isEqualTo(Cause.HASH_ALGORITHM_AND_SEED);
    assertThat(d.engineSettings()).hasValue(engine.settings());
    assertThat(d.fix()).contains("xxhash").contains("PYTHONHASHSEED=0");
  }

  @Test
  void differentTokensAreShownWhereTheyDiffer() {
    Vector engine = Vector.of(SHA256, "bs16_5blocks");
    int[] mine = engine.tokens().clone();
    mine[37] = 99; // e.g. another special token inside the template
    ParityDiagnosis d =
        ParityCheck.of(engine.settings())
            .diagnose(
                observed(engine)
                    .promptTokens(mine)
                    .engineTokens(engine.tokens(), "/tokenize")
                    .build());
    assertThat(d.cause()).isEqualTo(Cause.TOKENS);
    assertThat(d.firstTokenMismatch()).hasValue(37);
    assertThat(d.matchedBlocks()).isEqualTo(2); // blocks 0 and 1 precede the difference
    assertThat(d.message()).contains("/tokenize").contains("from token 37");
    assertThat(d.fix()).contains("chat template");
    // one more token at the end (a BOS the engine does not add, say)
    int[] longer = new int[engine.tokens().length + 1];
    System.arraycopy(engine.tokens(), 0, longer, 1, engine.tokens().length);
    longer[0] = 1;
    ParityDiagnosis bos =
        ParityCheck.of(engine.settings())
            .diagnose(
                observed(engine)
                    .promptTokens(longer)
                    .engineTokens(engine.tokens(), "render")
                    .build());
    assertThat(bos.cause()).isEqualTo(Cause.TOKENS);
    assertThat(bos.firstTokenMismatch()).hasValue(0);
    assertThat(bos.matchedBlocks()).isZero();
  }

  @Test
  void theEventsOwnTokensSeparateHashingFromTokenization() {
    Vector engine = Vector.of(SHA256_CBOR, "bs16_5blocks");
    int[] mine = engine.tokens().clone();
    mine[3] = 7;
    // hashing right, tokens wrong: the event's own tokens hash as configured, the prompt's do not
    ParityDiagnosis tokens =
        ParityCheck.of(engine.settings())
            .diagnose(
                ParityEvidence.builder().promptTokens(mine).storedEvent(engine.event()).build());
    assertThat(tokens.cause()).isEqualTo(Cause.TOKENS);
    assertThat(tokens.engineSettings()).hasValue(engine.settings());
    assertThat(tokens.message()).contains("first 3 token(s)");
    // both wrong: the algorithm and seed are still named, from the event alone
    ParityDiagnosis both =
        ParityCheck.of(HashSettings.vllmDefaults())
            .diagnose(
                ParityEvidence.builder().promptTokens(mine).storedEvent(engine.event()).build());
    assertThat(both.findings())
        .extracting(ParityDiagnosis.Finding::cause)
        .containsExactly(Cause.HASH_ALGORITHM_AND_SEED, Cause.TOKENS);
    assertThat(both.engineSettings()).hasValue(engine.settings());
    // LoRA and salt travel in the event's extra keys
    Vector lora = Vector.of(XXHASH_CBOR, "bs16_3blocks_lora_salt");
    ParityDiagnosis fromEvent =
        ParityCheck.of(HashSettings.of(HashAlgorithm.XXHASH_CBOR, 16, "42"))
            .diagnose(ParityEvidence.builder().storedEvent(lora.event()).build());
    assertThat(fromEvent.cause()).isEqualTo(Cause.HASH_SEED);
    assertThat(fromEvent.engineSettings()).hasValue(lora.settings());
    // events alone, hashing as configured
    ParityDiagnosis ok =
        ParityCheck.of(lora.settings())
            .diagnose(ParityEvidence.builder().storedEvent(lora.event()).build());
    assertThat(ok.cause()).isEqualTo(Cause.MATCH);
    assertThat(ok.message()).contains("hash as configured");
  }

  @Test
  void noEvidencePartialAndUnexplained() {
    Vector v = Vector.of(SHA256, "bs16_5blocks");
    ParityCheck check = ParityCheck.of(v.settings());
    ParityDiagnosis none =
        check.diagnose(ParityEvidence.builder().promptTokens(v.tokens()).build());
    assertThat(none.cause()).isEqualTo(Cause.NO_EVIDENCE);
    assertThat(none.fix()).contains("enable_kv_cache_events");
    ParityDiagnosis shortPrompt =
        check.diagnose(observed(v).promptTokens(Arrays.copyOf(v.tokens(), 15)).build());
    assertThat(shortPrompt.cause()).isEqualTo(Cause.NO_EVIDENCE);
    assertThat(shortPrompt.message()).contains("fewer than one block");
    ParityDiagnosis partial =
        check.diagnose(
            ParityEvidence.builder()
                .observedHashes(Arrays.copyOf(v.hashes(), 2))
                .observedBlockSize(16)
                .promptTokens(v.tokens())
                .build());
    assertThat(partial.cause()).isEqualTo(Cause.PARTIAL);
    assertThat(partial.matchedBlocks()).isEqualTo(2);
    assertThat(partial.ratio()).isEqualTo(0.4);
    assertThat(partial.fix()).contains("after token 32");
    ParityDiagnosis unexplained =
        check.diagnose(
            ParityEvidence.builder()
                .observedHashes(1L, 2L, 3L)
                .observedBlockSize(16)
                .promptTokens(v.tokens())
                .build());
    assertThat(unexplained.cause()).isEqualTo(Cause.UNEXPLAINED);
    assertThat(unexplained.message()).contains("\"42\"");
    assertThat(unexplained.engineSettings()).isEmpty();
  }

  @Test
  void anUnreproducibleConfigurationIsAFindingItself() {
    HashSettings xx = HashSettings.of(HashAlgorithm.XXHASH, 16, null);
    assertThat(xx.reproducible()).isFalse();
    assertThatThrownBy(() -> ParityCheck.of(xx).expectedHashes(new int[16], BlockExtraKeys.NONE))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("PYTHONHASHSEED");
    Vector engine = Vector.of(XXHASH, "bs16_2blocks");
    ParityDiagnosis d =
        ParityCheck.of(xx).diagnose(observed(engine).promptTokens(engine.tokens()).build());
    assertThat(d.cause()).isEqualTo(Cause.HASH_SEED);
    assertThat(d.message()).contains("at random per process");
    assertThat(d.engineSettings()).hasValue(engine.settings()); // PYTHONHASHSEED=0 found
  }

  @Test
  void settingsDescribeThemselves() {
    HashSettings s = HashSettings.of(HashAlgorithm.SHA256_CBOR, 32, "0");
    assertThat(s.describe()).isEqualTo("sha256_cbor, block size 32, PYTHONHASHSEED=0");
    assertThat(s.vllmCommandLine())
        .isEqualTo(
            "PYTHONHASHSEED=0 vllm serve ... --block-size 32 --prefix-caching-hash-algo sha256_cbor");
    assertThat(HashSettings.vllmDefaults().describe())
        .isEqualTo("sha256, block size 16, PYTHONHASHSEED unset");
    assertThat(s.withPythonHashSeed("").describeSeed()).isEqualTo("PYTHONHASHSEED=\"\"");
    assertThat(s).isEqualTo(HashSettings.of(HashAlgorithm.SHA256_CBOR, 32, "0"));
    assertThat(s).isNotEqualTo(s.withPythonHashSeed(null));
    assertThatThrownBy(() -> HashSettings.of(HashAlgorithm.SHA256, 0, null))
        .hasMessageContaining("blockSize must be > 0, was 0");
    assertThatThrownBy(() -> ParityCheck.builder(s).maxBlocks(0).build())
        .hasMessageContaining("maxBlocks must be > 0");
  }

  @Test
  void evidenceIsBounded() {
    ParityEvidence.Builder b = ParityEvidence.builder();
    for (int i = 0; i < ParityEvidence.MAX_EVENTS + 3; i++) {
      b.storedEvent(
          KvEvent.BlockStored.builder()
              .blockHashes(EngineHashes.ofInts(i + 1L))
              .blockSize(16)
              .build());
    }
    ParityEvidence e = b.build();
    assertThat(e.storedEvents()).hasSize(ParityEvidence.MAX_EVENTS);
    assertThat(e.dropped()).isEqualTo(3);
    assertThat(e.observedHashes()).hasSize(ParityEvidence.MAX_EVENTS + 3);
    assertThat(e.observedBlockSizes()).containsEntry(16, ParityEvidence.MAX_EVENTS + 3);
  }
}
