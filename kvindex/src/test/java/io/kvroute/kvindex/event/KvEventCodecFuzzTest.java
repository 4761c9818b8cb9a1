package io.kvroute.kvindex.event;

import static org.assertj.core.api.Assertions.assertThat;

import com.code_intelligence.jazzer.junit.FuzzTest;

/**
 * Arbitrary bytes never make the decoder throw anything but {@link KvEventDecodeException} (with an
 * offset inside the input), never allocate from a hostile length prefix, and whatever decodes
 * re-encodes to a canonical form that is stable. Runs its seeds (the golden payloads and hostile
 * cases) in regression mode under {@code mvn verify}; fuzz with {@code JAZZER_FUZZ=1}.
 */
class KvEventCodecFuzzTest {

  @FuzzTest(maxDuration = "30s")
  void decodeThrowsOnlyDecodeException(byte[] input) {
    KvEventBatch batch;
    try {
      batch = KvEventCodec.decode(input);
    } catch (KvEventDecodeException e) {
      assertThat(e.offset()).isBetween(0L, (long) input.length);
      return;
    }
    byte[] canonical = KvEventCodec.encode(batch);
    KvEventBatch again = KvEventCodec.decode(canonical);
    assertThat(KvEventCodec.encode(again)).isEqualTo(canonical);
    assertThat(again.events()).hasSameSizeAs(batch.events());
    batch.toJson();
  }
}
