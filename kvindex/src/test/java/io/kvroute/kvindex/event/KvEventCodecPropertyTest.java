package io.kvroute.kvindex.event;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.arbitrary;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.longs;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** Random batches in every schema survive encode → decode → encode unchanged. */
class KvEventCodecPropertyTest {

  private static KvEventBatch randomBatch(long seed) {
    Random r = new Random(seed);
    List<KvEvent> events = new ArrayList<>();
    int n = r.nextInt(5);
    for (int e = 0; e < n; e++) {
      int kind = r.nextInt(3);
      boolean bytes = r.nextInt(4) == 0;
      int blocks = r.nextInt(4);
      EngineHashes hashes;
      if (bytes) {
        byte[][] raw = new byte[blocks][];
        for (int i = 0; i < blocks; i++) {
          raw[i] = new byte[r.nextBoolean() ? 32 : 16];
          r.nextBytes(raw[i]);
        }
        hashes = EngineHashes.ofBytes(raw);
      } else {
        long[] v = new long[blocks];
        for (int i = 0; i < blocks; i++) {
          v[i] = r.nextLong();
        }
        hashes = EngineHashes.ofInts(v, r.nextInt(5) == 0);
      }
      if (kind == 0) {
        int bs = 1 + r.nextInt(16);
        int[] tokens = new int[bs * blocks + r.nextInt(3)];
        for (int i = 0; i < tokens.length; i++) {
          tokens[i] = r.nextInt(1 << (1 + r.nextInt(30)));
        }
        List<Object> extra = null;
        if (r.nextBoolean()) {
          extra = new ArrayList<>();
          for (int i = 0; i < blocks; i++) {
            extra.add(r.nextBoolean() ? null : List.of("lora-" + r.nextInt(9), (long) r.nextInt()));
          }
        }
        events.add(
            new KvEvent.BlockStored(
                hashes,
                r.nextBoolean() ? null : EngineHashes.ofInts(r.nextLong()),
                tokens,
                bs,
                r.nextBoolean() ? null : (long) r.nextInt(100),
                r.nextBoolean() ? "GPU" : "CPU",
                r.nextBoolean() ? null : "adapter-" + r.nextInt(1000),
                extra,
                r.nextBoolean() ? null : r.nextInt(4),
                r.nextBoolean() ? null : "full_attention",
                r.nextBoolean() ? null : r.nextInt(4096),
                null,
                null,
                null));
      } else if (kind == 1) {
        events.add(new KvEvent.BlockRemoved(hashes, "GPU", r.nextBoolean() ? null : 0, null, null));
      } else {
        events.add(KvEvent.AllBlocksCleared.INSTANCE);
      }
    }
    return new KvEventBatch(r.nextDouble() * 2e9, events, r.nextInt(8), EventSchema.M0, 0);
  }

  @Test
  void encodeDecodeEncodeIsStableInEverySchema() {
    qt().withExamples(300)
        .forAll(longs().all(), integers().between(0, EventSchema.values().length - 1))
        .checkAssert(
            (seed, s) -> {
              EventSchema schema = EventSchema.values()[s];
              KvEventBatch b = randomBatch(seed);
              byte[] bytes = KvEventCodec.encode(b, schema);
              KvEventBatch back = KvEventCodec.decode(bytes);
              assertThat(KvEventCodec.encode(back, schema)).isEqualTo(bytes);
              assertThat(back.events()).hasSameSizeAs(b.events());
              assertThat(back.ts()).isEqualTo(b.ts());
              for (int i = 0; i < b.events().size(); i++) {
                KvEvent want = b.events().get(i);
                KvEvent got = back.events().get(i);
                assertThat(got.type()).isEqualTo(want.type());
                if (want instanceof KvEvent.BlockStored) {
                  KvEvent.BlockStored w = (KvEvent.BlockStored) want;
                  KvEvent.BlockStored g = (KvEvent.BlockStored) got;
                  assertThat(g.blockHashes().values()).isEqualTo(w.blockHashes().values());
                  assertThat(g.tokenIds()).isEqualTo(w.tokenIds());
                  assertThat(g.parentBlockHash()).isEqualTo(w.parentBlockHash());
                } else if (want instanceof KvEvent.BlockRemoved) {
                  assertThat(((KvEvent.BlockRemoved) got).blockHashes().values())
                      .isEqualTo(((KvEvent.BlockRemoved) want).blockHashes().values());
                }
              }
            });
  }

  @Test
  void mapSchemasRoundTripEveryField() {
    qt().withExamples(200)
        .forAll(longs().all(), arbitrary().pick(EventSchema.M0, EventSchema.A5))
        .checkAssert(
            (seed, schema) -> {
              KvEventBatch b = randomBatch(seed).withSchema(schema);
              KvEventBatch back = KvEventCodec.decode(KvEventCodec.encode(b));
              for (int i = 0; i < b.events().size(); i++) {
                assertThat(back.events().get(i))
                    .as("event %d of %s", i, back.toJson())
                    .isEqualTo(b.events().get(i));
              }
              assertThat(back.dataParallelRank()).isEqualTo(b.dataParallelRank());
            });
  }
}
