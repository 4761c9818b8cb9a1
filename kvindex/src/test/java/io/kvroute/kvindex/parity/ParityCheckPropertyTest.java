package io.kvroute.kvindex.parity;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.lists;

import io.kvroute.kvindex.event.EngineHashes;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.hash.BlockExtraKeys;
import io.kvroute.kvindex.hash.BlockHash;
import io.kvroute.kvindex.hash.HashAlgorithm;
import io.kvroute.kvindex.parity.ParityDiagnosis.Cause;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.quicktheories.core.Gen;

/**
 * Random engines and random kvroute configurations: the diagnosis names the one thing that differs
 * (block size, then algorithm and seed, then tokens), and a right configuration always matches. The
 * engine's events come from {@link io.kvroute.kvindex.hash.VllmBlockHasher}, which the golden
 * vectors pin to vLLM's own code.
 */
class ParityCheckPropertyTest {
  private static final List<HashAlgorithm> ALGORITHMS = List.of(HashAlgorithm.values());
  private static final List<String> SEEDS = Arrays.asList(null, "0", "42");
  private static final int[] SIZES = {1, 2, 3, 16, 32};

  /** Settings picked by three small integers. */
  private static HashSettings settings(int alg, int seed, int size) {
    HashSettings s = HashSettings.of(ALGORITHMS.get(alg), SIZES[size], SEEDS.get(seed));
    // vLLM draws xxhash's NONE_HASH at random without a seed: no engine for a router to match
    return s.reproducible() ? s : s.withPythonHashSeed("0");
  }

  private static Gen<HashSettings> anySettings() {
    return integers()
        .between(0, ALGORITHMS.size() - 1)
        .zip(
            integers().between(0, SEEDS.size() - 1),
            integers().between(0, SIZES.length - 1),
            ParityCheckPropertyTest::settings);
  }

  private static KvEvent.BlockStored engineEvent(HashSettings engine, int[] tokens) {
    List<BlockHash> hashes = engine.hasher().hashBlocks(tokens);
    long[] u64 = hashes.stream().mapToLong(BlockHash::u64).toArray();
    return KvEvent.BlockStored.builder()
        .blockHashes(EngineHashes.ofInts(u64))
        .tokenIds(Arrays.copyOf(tokens, u64.length * engine.blockSize()))
        .blockSize(engine.blockSize())
        .build();
  }

  @Test
  void theDiagnosisNamesWhatDiffers() {
    qt().withExamples(150)
        .forAll(
            anySettings(),
            anySettings(),
            lists().of(integers().between(0, 151_935)).ofSizeBetween(40, 120),
            integers().between(-1, 39))
        .checkAssert(
            (engine, configured, tokenList, changed) -> {
              int[] engineTokens = tokenList.stream().mapToInt(Integer::intValue).toArray();
              int[] mine = engineTokens.clone();
              if (changed >= 0) {
                mine[changed] = mine[changed] + 1; // kvroute tokenizes one token differently
              }
              ParityDiagnosis d =
                  ParityCheck.of(configured)
                      .diagnose(
                          ParityEvidence.builder()
                              .promptTokens(mine)
                              .storedEvent(engineEvent(engine, engineTokens))
                              .build());
              boolean sizeDiffers = engine.blockSize() != configured.blockSize();
              boolean hashDiffers =
                  engine.algorithm() != configured.algorithm()
                      || !seed(engine).equals(seed(configured));
              Cause expected;
              if (sizeDiffers) {
                expected = Cause.BLOCK_SIZE;
              } else if (hashDiffers) {
                expected =
                    engine.algorithm() != configured.algorithm()
                        ? (seed(engine).equals(seed(configured))
                            ? Cause.HASH_ALGORITHM
                            : Cause.HASH_ALGORITHM_AND_SEED)
                        : Cause.HASH_SEED;
              } else if (changed >= 0
                  && changed < engineTokens.length / engine.blockSize() * engine.blockSize()) {
                // the blocks before the changed token still match: a partial match when any
                expected = changed >= configured.blockSize() ? Cause.PARTIAL : Cause.TOKENS;
              } else {
                expected = Cause.MATCH;
              }
              assertThat(d.cause()).as(d.toString()).isEqualTo(expected);
              // the engine's hashing is always identified from its own event
              assertThat(d.engineSettings()).as(d.toString()).hasValue(engine);
            });
  }

  @Test
  void withTheEnginesTokensTheFirstDifferenceIsExact() {
    qt().withExamples(100)
        .forAll(
            anySettings(),
            lists().of(integers().between(0, 151_935)).ofSizeBetween(1, 100),
            integers().between(0, 99))
        .checkAssert(
            (settings, tokenList, at) -> {
              int[] engineTokens = tokenList.stream().mapToInt(Integer::intValue).toArray();
              int[] mine = engineTokens.clone();
              int i = at % mine.length;
              mine[i] = -mine[i] - 1;
              ParityDiagnosis d =
                  ParityCheck.of(settings)
                      .diagnose(
                          ParityEvidence.builder()
                              .promptTokens(mine)
                              .engineTokens(engineTokens, "/tokenize")
                              .observedHashes(
                                  ParityCheck.of(settings)
                                      .expectedHashes(engineTokens, BlockExtraKeys.NONE))
                              .observedHashes(42L)
                              .observedBlockSize(settings.blockSize())
                              .build());
              assertThat(d.firstTokenMismatch()).hasValue(i);
              assertThat(d.cause()).isEqualTo(Cause.TOKENS);
              assertThat(d.matchedBlocks()).isEqualTo(i / settings.blockSize());
            });
  }

  /** The seed NONE_HASH is derived from ("unset" is vLLM's default seed for sha256*). */
  private static String seed(HashSettings s) {
    return s.pythonHashSeed().orElse("vllm-none-hash");
  }
}
