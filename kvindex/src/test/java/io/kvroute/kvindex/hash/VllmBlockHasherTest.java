package io.kvroute.kvindex.hash;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.lists;

import java.util.List;
import org.junit.jupiter.api.Test;

class VllmBlockHasherTest {

  @Test
  void chainEqualsRepeatedHashBlock() {
    for (HashAlgorithm alg : HashAlgorithm.values()) {
      VllmBlockHasher h =
          VllmBlockHasher.builder().algorithm(alg).blockSize(4).hashSeed("0").build();
      qt().withExamples(40)
          .forAll(lists().of(integers().between(-5, 1_000_000)).ofSizeBetween(0, 30))
          .checkAssert(
              toks -> {
                int[] t = toks.stream().mapToInt(Integer::intValue).toArray();
                List<BlockHash> hs = h.hashBlocks(t, BlockExtraKeys.lora("x"));
                assertThat(hs).hasSize(t.length / 4);
                byte[] parent = null;
                for (int i = 0; i < hs.size(); i++) {
                  BlockHash b = h.hashBlock(parent, t, 4 * i, 4 * i + 4, List.of("x"));
                  assertThat(b).isEqualTo(hs.get(i));
                  assertThat(b.digestLength()).isEqualTo(alg.digestLength());
                  assertThat(b.u64()).isEqualTo(BlockHash.eventForm(b.digest()));
                  parent = b.digest();
                }
              });
    }
  }

  @Test
  void largeBlocksUseMultiplePickleFrames() {
    VllmBlockHasher h =
        VllmBlockHasher.builder()
            .algorithm(HashAlgorithm.SHA256)
            .blockSize(20_000)
            .hashSeed("0")
            .build();
    int[] t = new int[20_000];
    java.util.Arrays.fill(t, 70_000); // 5 bytes each: > 64 KiB pre-image
    byte[] pre = h.preimage(null, t, 0, t.length, null);
    assertThat(pre.length).isGreaterThan(100_000);
    assertThat(h.hashBlocks(t)).hasSize(1);
  }

  @Test
  void validation() {
    assertThatThrownBy(() -> VllmBlockHasher.builder().blockSize(0).hashSeed("0").build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("blockSize must be > 0, was 0");
    // sha256 and sha256_cbor default to vLLM's fixed seed; the others have no default
    assertThat(VllmBlockHasher.builder().build().noneHash())
        .isEqualTo(
            VllmBlockHasher.noneHash(HashAlgorithm.SHA256, VllmBlockHasher.DEFAULT_NONE_HASH_SEED));
    assertThat(VllmBlockHasher.builder().algorithm(HashAlgorithm.SHA256_CBOR).build().noneHash())
        .isEqualTo(VllmBlockHasher.noneHash(HashAlgorithm.SHA256_CBOR, "vllm-none-hash"));
    assertThat(VllmBlockHasher.builder().hashSeed("0").build().noneHash())
        .as("an explicit seed wins")
        .isEqualTo(VllmBlockHasher.noneHash(HashAlgorithm.SHA256, "0"));
    for (HashAlgorithm a :
        List.of(HashAlgorithm.XXHASH, HashAlgorithm.XXHASH_CBOR, HashAlgorithm.SHA256_CBOR_64BIT)) {
      assertThatThrownBy(() -> VllmBlockHasher.builder().algorithm(a).build())
          .hasMessageContaining("hashSeed must be set for " + a.vllmName())
          .hasMessageContaining("randomly per process")
          .hasMessageContaining("engine-key mapping");
    }
    assertThatThrownBy(() -> VllmBlockHasher.builder().noneHash(new byte[3]).build())
        .hasMessageContaining("noneHash must be 32 bytes for sha256, was 3");
    assertThatThrownBy(() -> HashAlgorithm.fromVllmName("md5"))
        .hasMessageContaining("unknown hash algorithm \"md5\"; known: sha256, sha256_cbor");
    assertThatThrownBy(
            () ->
                VllmBlockHasher.builder()
                    .hashSeed("0")
                    .build()
                    .hashBlock(null, new int[] {1}, 0, 1, List.of(new Object())))
        .hasMessageContaining("unsupported extra-key value type");
  }

  @Test
  void explicitNoneHashAndEventForm() {
    byte[] none = new byte[16];
    VllmBlockHasher h =
        VllmBlockHasher.builder().algorithm(HashAlgorithm.XXHASH).noneHash(none).build();
    assertThat(h.noneHash()).isEqualTo(none);
    assertThat(BlockHash.eventForm(new byte[] {1, 2})).isEqualTo(0x0102L);
    assertThat(BlockHash.of(new byte[] {(byte) 0xff, 0, 0, 0, 0, 0, 0, 0, 1}).u64()).isEqualTo(1L);
  }
}
