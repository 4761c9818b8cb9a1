package io.kvroute.kvindex;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.kvindex.contract.BlockIndexContract;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;

/** The {@link BlockIndexContract} on the in-memory index, plus its own bounds and meters. */
class BlockIndexTest extends BlockIndexContract {

  @Override
  protected BlockIndex createIndex(IndexConfig config) {
    return BlockIndex.inMemory(config);
  }

  @Test
  void boundsEvictAndAreCounted() {
    SimpleMeterRegistry reg = new SimpleMeterRegistry();
    BlockIndex idx =
        newIndex(IndexConfig.builder().maxKeys(8).maxPodsPerKey(2).meterRegistry(reg).build());
    for (int s = 0; s < 10; s++) {
      int[] t = tokens(s + 1, 16);
      idx.blockStored("a", engine(16, t, null), false, 0, t, 16, null, null, 0);
    }
    assertThat(idx.stats().keys()).isEqualTo(8);
    assertThat(idx.stats().evictions()).containsEntry("max_keys", 2L);
    PrefixMatch m = oneBlockOnThreePods(idx);
    assertThat(m.matchedBlocks("p1")).isZero();
    assertThat(m.matchedBlocks("p3")).isEqualTo(1);
    assertThat(
            reg.get("kvroute.kvindex.evictions")
                .tag("reason", "max_pods_per_key")
                .functionCounter()
                .count())
        .isEqualTo(1.0);
    assertThat(reg.get("kvroute.kvindex.keys").gauge().value()).isEqualTo(8.0);
    assertThat(
            reg.get("kvroute.kvindex.applied.events")
                .tag("type", "stored")
                .functionCounter()
                .count())
        .isEqualTo(13.0);
    assertThat(reg.get("kvroute.kvindex.lookups").functionCounter().count()).isEqualTo(1.0);
  }

  @Test
  void configValidationNamesTheField() {
    assertThatThrownBy(() -> IndexConfig.builder().blockSize(0).build())
        .hasMessage("index.blockSize must be > 0, was 0");
    assertThatThrownBy(() -> IndexConfig.builder().maxKeys(0).build())
        .hasMessage("index.maxKeys must be > 0, was 0");
    assertThatThrownBy(() -> IndexConfig.builder().maxPodsPerKey(-1).build())
        .hasMessage("index.maxPodsPerKey must be > 0, was -1");
    assertThatThrownBy(() -> IndexConfig.builder().maxPods(0).build())
        .hasMessageContaining("index.maxPods must be in [1, 524287], was 0");
    assertThatThrownBy(() -> IndexConfig.builder().tierWeight("cpu", 2.0).build())
        .hasMessageContaining("index.tierWeights[CPU] must be <= the GPU weight 1.0, was 2.0");
    assertThatThrownBy(() -> IndexConfig.builder().defaultTierWeight(-1).build())
        .hasMessageContaining("index.defaultTierWeight");
    IndexConfig c = IndexConfig.builder().tierWeight("storage", 0.3).build();
    assertThat(c.tierWeight("STORAGE")).isEqualTo(0.3);
    assertThat(c.tierWeight(null)).isEqualTo(1.0);
    assertThat(c.tierWeight("disk")).isEqualTo(0.5);
    assertThat(c.maxEngineKeys()).isEqualTo(c.maxKeys());
  }
}
