package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.kvindex.event.EngineHashes;
import io.kvroute.kvindex.event.KvEvent;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** How {@code kvroute doctor} links events into chains and finds its probe among them. */
class ProbeChainsTest {

  private static KvEvent.BlockStored stored(Long parent, int[] tokens, long... hashes) {
    KvEvent.BlockStored.Builder b =
        KvEvent.BlockStored.builder()
            .blockHashes(EngineHashes.ofInts(hashes))
            .tokenIds(tokens)
            .blockSize(2);
    if (parent != null) {
      b.parentBlockHash(parent);
    }
    return b.build();
  }

  @Test
  void eventsChainThroughTheirParents() {
    List<ProbeChains.Chain> chains =
        ProbeChains.chains(
            List.of(
                stored(null, new int[] {1, 2, 3, 4}, 11, 12),
                stored(null, new int[] {9, 9}, 91),
                stored(12L, new int[] {5, 6}, 13),
                stored(77L, new int[] {7, 8}, 78),
                // sparse (a skipped block's tokens without its hash): left out
                stored(null, new int[] {1, 2, 3, 4}, 55)));
    assertThat(chains).hasSize(3);
    assertThat(chains.get(0).tokens()).containsExactly(1, 2, 3, 4, 5, 6);
    assertThat(chains.get(0).root()).isTrue();
    assertThat(chains.get(0).blocks()).isEqualTo(3);
    assertThat(chains.get(2).root()).isFalse();
  }

  @Test
  void theProbeIsFoundByItsTokensEvenAfterACachedPrefix() {
    List<ProbeChains.Chain> chains =
        ProbeChains.chains(
            List.of(
                stored(null, new int[] {40, 41, 42, 43, 44, 45}, 1, 2, 3),
                // the probe: its first block (tokens 0-1) was cached by an earlier request
                stored(500L, new int[] {12, 13, 14, 15}, 4, 5)));
    int[] probe = {10, 11, 12, 13, 14, 15, 16};
    ProbeChains.Attribution a =
        ProbeChains.attribute(chains, Map.of("/tokenize", probe), probe.length);
    assertThat(a.how()).isEqualTo("token ids");
    assertThat(a.offset()).isEqualTo(2);
    assertThat(a.chain()).isSameAs(chains.get(1));
    assertThat(a.tokensUpTo(5)).containsExactly(12, 13, 14);
  }

  @Test
  void withoutAgreeingIdsTheRootChainMostLikeTheProbeIsTaken() {
    List<ProbeChains.Chain> chains =
        ProbeChains.chains(
            List.of(
                stored(null, new int[] {70, 71}, 1),
                stored(null, new int[] {1, 10, 11, 12, 13, 14}, 2, 3, 4)));
    // the tokenizer's ids lack the engine's BOS (1): shifted, they agree nowhere
    int[] probe = {10, 11, 12, 13, 14};
    ProbeChains.Attribution a = ProbeChains.attribute(chains, Map.of("local", probe), 6);
    assertThat(a.how()).isEqualTo("arrival");
    assertThat(a.chain()).isSameAs(chains.get(1)); // the longer of two unrelated roots
    assertThat(ProbeChains.attribute(List.of(), Map.of("local", probe), 6)).isNull();
  }
}
