package io.kvroute.kvindex.event;

import static io.kvroute.kvindex.vectors.GoldenVectors.hex;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/** Decoder leniency, strictness on malformed input, and msgspec-exact encoding. */
class KvEventCodecTest {

  private static final String TS1 = "cb41da305498100000"; // 1757500000.25

  private static KvEventBatch decode(String hexPayload) {
    return KvEventCodec.decode(hex(hexPayload));
  }

  @Test
  void specByteExamplesRoundTrip() {
    String a5Clear = "93" + TS1 + "91" + "91" + "b0" + hex("AllBlocksCleared".getBytes()) + "00";
    String m0Clear =
        "93" + TS1 + "91" + "81a474797065" + "b0" + hex("AllBlocksCleared".getBytes()) + "00";
    String a5Removal =
        "93"
            + TS1
            + "91"
            + "94ac"
            + hex("BlockRemoved".getBytes())
            + "91cf83331e93f9f605bd"
            + "a3475055"
            + "00"
            + "00";
    String m0Removal =
        "93"
            + TS1
            + "91"
            + "84a474797065ac"
            + hex("BlockRemoved".getBytes())
            + "ac"
            + hex("block_hashes".getBytes())
            + "91cf83331e93f9f605bd"
            + "a6"
            + hex("medium".getBytes())
            + "a3475055"
            + "a9"
            + hex("group_idx".getBytes())
            + "00"
            + "00";
    for (String p : List.of(a5Clear, m0Clear, a5Removal, m0Removal)) {
      KvEventBatch b = decode(p);
      assertThat(b.ts()).isEqualTo(1757500000.25);
      assertThat(hex(KvEventCodec.encode(b))).isEqualTo(p);
    }
    KvEventBatch removal = decode(m0Removal);
    assertThat(removal.schema()).isEqualTo(EventSchema.M0);
    KvEvent.BlockRemoved r = (KvEvent.BlockRemoved) removal.events().get(0);
    assertThat(r.blockHashes().values()).containsExactly(0x83331e93f9f605bdL);
    assertThat(r.blockHashes().toUnsignedString(0)).isEqualTo("9453933663683478973");
    // the same removal in every family
    assertThat(hex(KvEventCodec.encode(removal, EventSchema.A5))).isEqualTo(a5Removal);
    assertThat(hex(KvEventCodec.encode(removal, EventSchema.A0)))
        .isEqualTo("92" + TS1 + "9192ac" + hex("BlockRemoved".getBytes()) + "91cf83331e93f9f605bd");
  }

  @Test
  void encodesEverySchemaFamilyWithDeclaredFieldsOnly() {
    KvEvent.BlockStored s =
        new KvEvent.BlockStored(
            EngineHashes.ofInts(-1L, 5L),
            EngineHashes.ofInts(7L),
            new int[] {1, 300, 70000},
            3,
            9L,
            "CPU",
            "lora-a",
            Arrays.asList(null, List.of("lora-a", 3L)),
            1,
            "sliding_window",
            128,
            "local",
            "own",
            "sess");
    KvEventBatch b = new KvEventBatch(2.0, List.of(s), 1, EventSchema.M2, 0);
    for (EventSchema schema : EventSchema.values()) {
      byte[] bytes = KvEventCodec.encode(b, schema);
      KvEventBatch back = KvEventCodec.decode(bytes);
      KvEvent.BlockStored d = (KvEvent.BlockStored) back.events().get(0);
      assertThat(d.blockHashes().values()).containsExactly(-1L, 5L);
      assertThat(d.tokenIds()).containsExactly(1, 300, 70000);
      assertThat(d.loraId()).isEqualTo(9L);
      assertThat(back.schema()).as(schema.name()).isIn(schema, equivalent(schema));
      assertThat(d.medium()).isEqualTo(schema.storedFields() > 5 ? "CPU" : null);
      assertThat(d.sessionId()).isEqualTo(schema == EventSchema.M2 ? "sess" : null);
      assertThat(d.kvCacheSpecSlidingWindow()).isEqualTo(schema.storedFields() >= 11 ? 128 : null);
      assertThat(back.dataParallelRank()).isEqualTo(schema == EventSchema.A0 ? null : 1);
      assertThat(KvEventCodec.encode(back, schema)).isEqualTo(bytes);
    }
    // the uint64 >= 2^63 is written as cf, never as a negative int64 (d3)
    assertThat(hex(KvEventCodec.encode(b, EventSchema.A5))).contains("92cfffffffffffffffff05");
  }

  private static EventSchema equivalent(EventSchema s) {
    return s == EventSchema.A0_DP ? EventSchema.A0_DP : s;
  }

  @Test
  void hashesAsSignedIntsAndBytesAreNormalised() {
    // SGLang: signed int64 (d3) stays signed on re-encoding
    EngineHashes signed = EngineHashes.ofInts(new long[] {-5L, 1234567890123L}, true);
    KvEventBatch b =
        new KvEventBatch(1.0, List.of(KvEvent.BlockRemoved.of(signed)), 0, EventSchema.A0_DP, 0);
    byte[] enc = KvEventCodec.encode(b);
    assertThat(hex(enc)).contains("92fbcf0000011f71fb04cb");
    KvEventBatch back = KvEventCodec.decode(enc);
    assertThat(((KvEvent.BlockRemoved) back.events().get(0)).blockHashes().signed()).isTrue();

    // bin values: last 8 bytes big-endian; shorter ones left-padded
    byte[] b16 = new byte[16];
    b16[15] = 1;
    b16[0] = (byte) 0xff;
    byte[] b4 = {1, 2, 3, 4};
    EngineHashes bytes = EngineHashes.ofBytes(b16, b4);
    assertThat(bytes.values()).containsExactly(1L, 0x01020304L);
    KvEventBatch bb =
        new KvEventBatch(1.0, List.of(KvEvent.BlockRemoved.of(bytes)), 0, EventSchema.M0, 0);
    KvEventBatch bback = KvEventCodec.decode(KvEventCodec.encode(bb));
    EngineHashes h = ((KvEvent.BlockRemoved) bback.events().get(0)).blockHashes();
    assertThat(h.values()).containsExactly(1L, 0x01020304L);
    assertThat(h.raw(0)).isEqualTo(b16);
    assertThat(bback.toJson()).contains("\"block_hashes_hex\":[\"ff");
  }

  @Test
  void acceptsMapBatchTwoElementBatchMixedLayoutsAndUnknowns() throws Exception {
    // {"ts": 1.0, "events": [["AllBlocksCleared"], {"type": "Nope"}], "attn_dp_rank": 2, "x": nil}
    MessageBufferPacker p = MessagePack.newDefaultBufferPacker();
    p.packMapHeader(4);
    p.packString("ts").packDouble(1.0);
    p.packString("events").packArrayHeader(2);
    p.packArrayHeader(1).packString("AllBlocksCleared");
    p.packMapHeader(1).packString("type").packString("Nope");
    p.packString("attn_dp_rank").packInt(2);
    p.packString("x").packNil();
    KvEventBatch b = KvEventCodec.decode(p.toByteArray());
    assertThat(b.ts()).isEqualTo(1.0);
    assertThat(b.events()).containsExactly(KvEvent.AllBlocksCleared.INSTANCE);
    assertThat(b.unknownEvents()).isEqualTo(1);
    assertThat(b.dataParallelRank()).isEqualTo(2);

    // [ts, events]: a minimal BlockStored array (tag + 4), a map removal with an unknown key and
    // no "type" first, and a BlockRemoved array with extra trailing elements
    p = MessagePack.newDefaultBufferPacker();
    p.packArrayHeader(2).packDouble(3.0).packArrayHeader(3);
    p.packArrayHeader(5).packString("BlockStored");
    p.packArrayHeader(1).packLong(1).packNil().packArrayHeader(2).packInt(3).packInt(4).packInt(2);
    p.packMapHeader(3).packString("block_hashes").packArrayHeader(1).packInt(2);
    p.packString("extra").packBoolean(true).packString("type").packString("BlockRemoved");
    p.packArrayHeader(7).packString("BlockRemoved").packArrayHeader(1).packInt(3);
    p.packString("CPU").packInt(1).packNil().packNil().packString("future-field");
    KvEventBatch t = KvEventCodec.decode(p.toByteArray());
    assertThat(t.schema()).isEqualTo(EventSchema.A0);
    assertThat(t.dataParallelRank()).isNull();
    KvEvent.BlockStored st = (KvEvent.BlockStored) t.events().get(0);
    assertThat(st.blockHashes().values()).containsExactly(1L);
    assertThat(st.parentBlockHash()).isNull();
    assertThat(st.tokenIds()).containsExactly(3, 4);
    assertThat(st.blockSize()).isEqualTo(2);
    assertThat(st.medium()).isNull();
    assertThat(t.events().get(1))
        .isEqualTo(new KvEvent.BlockRemoved(EngineHashes.ofInts(2L), null, null, null, null));
    assertThat(t.events().get(2))
        .isEqualTo(new KvEvent.BlockRemoved(EngineHashes.ofInts(3L), "CPU", 1, null, null));
  }

  @Test
  void unknownTagsAreSkippedAndCounted() {
    String p =
        "93" + TS1 + "92" + "92a3466f6f01" + "81a474797065a3426172" + "00"; // ["Foo",1], {type:Bar}
    KvEventBatch b = decode(p);
    assertThat(b.events()).isEmpty();
    assertThat(b.unknownEvents()).isEqualTo(2);
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "", // empty
        "c1", // never-used byte
        "93cb41da3054", // truncated float
        "93" + "cb41da305498100000" + "dd7fffffff", // events array claims 2^31-1 elements
        "93" + "cb41da305498100000" + "91" + "dc7fff", // event array claims 32767 elements
        "93" + "cb41da305498100000" + "9192" + "db7fffffff41", // tag str32 of 2^31-1 bytes
        "93" + "cb41da305498100000" + "9192" + "c6ffffffff", // tag is bin
        "93" + "cb41da305498100000" + "9195ab426c6f636b53746f726564" + "dd7ffffff0", // hashes
        "93" + "cb41da305498100000" + "9195ab426c6f636b53746f726564" + "91c6fffffff0", // hash bin
        "93" + "cb41da305498100000" + "9191ab426c6f636b53746f726564", // stored without fields
        "93" + "cb41da305498100000" + "91df7fffffff", // map event with huge count
        "93" + "cb41da305498100000" + "90" + "00" + "00", // trailing bytes
        "91cb41da305498100000", // batch of 1
        "a3616263", // batch is a string
        "93" + "a3616263" + "90" + "00", // ts is a string
        "93" + "cb41da305498100000" + "91" + "81a474797065" + "c0", // type is nil
        "93" + "cb41da305498100000" + "90" + "cf8000000000000000", // dp rank overflows int
      })
  void malformedInputRaisesOnlyTheDecodeException(String p) {
    byte[] bytes = hex(p);
    KvEventDecodeException e =
        catchThrowableOfType(KvEventDecodeException.class, () -> KvEventCodec.decode(bytes));
    assertThat(e).as("payload %s", p).isNotNull();
    assertThat(e.offset()).isBetween(0L, (long) bytes.length);
    assertThat(e.getMessage()).contains("byte offset");
  }

  @Test
  void deepNestingIsRejected() {
    StringBuilder extra = new StringBuilder();
    for (int i = 0; i < 1000; i++) {
      extra.append("91");
    }
    extra.append("c0");
    String p =
        "93"
            + TS1
            + "91"
            + "99ab"
            + hex("BlockStored".getBytes())
            + "9101"
            + "c0"
            + "90"
            + "10"
            + "c0"
            + "a3475055"
            + "c0"
            + extra
            + "00";
    assertThatThrownBy(() -> decode(p))
        .isInstanceOf(KvEventDecodeException.class)
        .hasMessageContaining("nested deeper");
  }

  @Test
  void encoderRejectsUnencodableExtraKeys() {
    KvEvent.BlockStored s =
        new KvEvent.BlockStored(
            EngineHashes.ofInts(1L),
            null,
            new int[0],
            0,
            null,
            "GPU",
            null,
            List.of(new Object()),
            null,
            null,
            null,
            null,
            null,
            null);
    assertThatThrownBy(() -> KvEventCodec.encode(KvEventBatch.of(1.0, List.of(s))))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("cannot encode");
  }

  @Test
  void extraKeysEntriesMustBeTuplesOrNilAsInVllm() {
    // vLLM: extra_keys: list[tuple[Any, ...] | None] | None; msgspec rejects a bare string entry
    for (EventSchema schema : List.of(EventSchema.A5, EventSchema.M2)) {
      KvEvent.BlockStored ok =
          KvEvent.BlockStored.builder()
              .blockHashes(1L, 2L)
              .tokenIds(new int[] {1, 2, 3, 4})
              .blockSize(2)
              .extraKeys(Arrays.asList(null, List.of("adapter", List.of("mm", -3L))))
              .build();
      KvEventBatch b =
          KvEventCodec.decode(KvEventCodec.encode(KvEventBatch.of(1.0, List.of(ok)), schema));
      assertThat(b.events()).containsExactly(ok);

      KvEvent.BlockStored bare =
          ok.toBuilder().extraKeys(Arrays.asList(List.of("x"), "adapter-116")).build();
      byte[] bytes = KvEventCodec.encode(KvEventBatch.of(1.0, List.of(bare)), schema);
      KvEventDecodeException e =
          catchThrowableOfType(KvEventDecodeException.class, () -> KvEventCodec.decode(bytes));
      assertThat(e).as("schema %s", schema).isNotNull();
      assertThat(e.getMessage()).contains("extra_keys[1]").contains("STRING");
      assertThat(e.offset()).isBetween(1L, (long) bytes.length);
    }
  }

  @Test
  void eventsAndBatchesAreBuiltWithValidatingBuilders() {
    KvEvent.BlockStored s =
        KvEvent.BlockStored.builder()
            .blockHashes(5L)
            .parentBlockHash(4L)
            .tokenIds(new int[] {1, 2})
            .blockSize(2)
            .loraId(7L)
            .build();
    assertThat(s.hasParent()).isTrue();
    assertThat(s.parentHash()).isEqualTo(4L);
    assertThat(s.effectiveLoraName()).isEqualTo("7");
    assertThat(s.medium()).isEqualTo("GPU");
    assertThat(s.groupIndex()).isZero();
    assertThat(s.toBuilder().loraName("a").build().effectiveLoraName()).isEqualTo("a");
    assertThat(s.toBuilder().build()).isEqualTo(s).hasSameHashCodeAs(s);
    assertThatThrownBy(() -> KvEvent.BlockStored.builder().build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("blockHashes");
    assertThatThrownBy(
            () ->
                KvEvent.BlockStored.builder()
                    .blockHashes(1L)
                    .parentBlockHash(EngineHashes.ofInts(1L, 2L))
                    .build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("parentBlockHash");
    KvEvent.BlockRemoved r = KvEvent.BlockRemoved.builder().blockHashes(3L).medium("CPU").build();
    assertThat(r.toBuilder().build()).isEqualTo(r);
    assertThat(r.groupIdx()).isZero();

    java.util.ArrayList<KvEvent> events = new java.util.ArrayList<>(List.of(s, r));
    KvEventBatch b =
        KvEventBatch.builder()
            .ts(2.5)
            .events(events)
            .dataParallelRank(null)
            .schema(EventSchema.A0)
            .build();
    events.clear(); // copied
    assertThat(b.events()).containsExactly(s, r);
    assertThat(b.dpRank()).isZero();
    assertThat(b.toBuilder().build()).isEqualTo(b);
    assertThatThrownBy(() -> KvEventBatch.builder().unknownEvents(-1).build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("unknownEvents");
  }
}
