package io.kvroute.kvindex.redis;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.contract.BlockIndexContract;
import io.kvroute.kvindex.redis.RedisIndexConfig.IngestMode;
import io.lettuce.core.KeyScanCursor;
import io.lettuce.core.RedisClient;
import io.lettuce.core.ScanArgs;
import io.lettuce.core.ScanCursor;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.codec.ByteArrayCodec;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The write script's economies keep the guarantees: a mapping this replica wrote recently is not
 * rewritten on every store, yet its TTL is refreshed once a quarter of it has passed and it is
 * written again whenever the request key it names was gone (the server lost it); a removal the
 * local mapping cache resolves removes the entry even if the server's mapping is gone; and a burst
 * of events applied in shared script calls (one read and one write per key per call) leaves the
 * same index as the in-memory one.
 */
class RedisWritePathTest {
  static RedisServer server;
  static RedisClient raw;
  static StatefulRedisConnection<byte[], byte[]> conn;
  static RedisCommands<byte[], byte[]> redis;

  @BeforeAll
  static void start() {
    server = RedisServer.start();
    raw = RedisClient.create(server.url());
    conn = raw.connect(ByteArrayCodec.INSTANCE); // keys end in 8 raw bytes
    redis = conn.sync();
  }

  @AfterAll
  static void stop() {
    if (conn != null) {
      conn.close();
      raw.shutdown();
    }
    if (server != null) {
      server.close();
    }
  }

  private static RedisIndexConfig.Builder config(String replica, AtomicLong clock) {
    return RedisIndexConfig.builder()
        .url(server.url())
        .replicaId(replica)
        .ingestMode(IngestMode.LEASED)
        .mappingTtl(Duration.ofHours(1))
        .mappingCacheSize(4096)
        .nanoClock(clock::get)
        .lookupTimeout(Duration.ofSeconds(10))
        .commandTimeout(Duration.ofSeconds(10));
  }

  private static List<ByteBuffer> keys(String ns, String kind) {
    List<ByteBuffer> out = new ArrayList<>();
    ScanCursor cursor = ScanCursor.INITIAL;
    do {
      KeyScanCursor<byte[]> page =
          redis.scan(cursor, ScanArgs.Builder.matches("{kvroute:" + ns + "}:" + kind + ":*"));
      page.getKeys().forEach(k -> out.add(ByteBuffer.wrap(k)));
      cursor = page;
    } while (!cursor.isFinished());
    return out;
  }

  private static byte[][] array(List<ByteBuffer> keys) {
    return keys.stream().map(ByteBuffer::array).toArray(byte[][]::new);
  }

  private static void store(BlockIndex idx, String pod, int[] tokens, long[] engine) {
    idx.blockStored(pod, engine, false, 0, tokens, 16, null, null, 0);
  }

  @Test
  void aFreshMappingIsRefreshedOnceAQuarterOfItsTtlPassedAndRewrittenWhenTheServerLostIt() {
    String ns = "fresh";
    int[] tokens = BlockIndexContract.tokens(3, 4 * 16);
    long[] engine = BlockIndexContract.engine(16, tokens, null);
    AtomicLong clock = new AtomicLong(1_000_000_000L);
    IndexConfig ic = IndexConfig.builder().modelName("m").build();
    try (RedisIndexClient a = RedisIndexClient.connect(config("a", clock).build());
        RedisIndexClient b = RedisIndexClient.connect(config("b", clock).build())) {
      RedisBlockIndex ia = a.index(ic, ns);
      store(ia, "p0", tokens, engine); // new mappings: written
      store(ia, "p1", tokens, engine); // rewritten (Redis held them): recorded as fresh
      ia.flush();
      List<ByteBuffer> mappings = keys(ns, "e");
      assertThat(mappings).hasSize(4);
      mappings.forEach(k -> redis.pexpire(k.array(), 60_000));

      // within a quarter of the TTL: p2's store leaves the mappings (their TTL) as they were
      clock.addAndGet(Duration.ofMinutes(10).toNanos());
      store(ia, "p2", tokens, engine);
      ia.flush();
      mappings.forEach(k -> assertThat(redis.pttl(k.array())).isBetween(1L, 60_000L));

      // past it: p3's store refreshes them
      clock.addAndGet(Duration.ofMinutes(6).toNanos());
      store(ia, "p3", tokens, engine);
      ia.flush();
      mappings.forEach(k -> assertThat(redis.pttl(k.array())).isGreaterThan(60_000L));

      // the server loses the keys (evicted, flushed): the next store writes the mappings again
      // although this replica rewrote them a moment ago
      List<ByteBuffer> requestKeys = keys(ns, "r");
      assertThat(requestKeys).hasSize(4);
      redis.del(array(mappings));
      redis.del(array(requestKeys));
      store(ia, "p4", tokens, engine);
      ia.flush();
      assertThat(keys(ns, "e")).containsExactlyInAnyOrderElementsOf(mappings);

      // a replica with nothing cached removes p4's blocks through them
      RedisBlockIndex ib = b.index(ic, ns);
      ia.close(); // releases p4's lease
      ib.blockRemoved("p4", engine, null, 0);
      ib.flush();
      PrefixMatch m = ib.lookup(ib.requestKeys(tokens, (String) null), List.of("p4"));
      assertThat(m.matchedBlocks(0)).isZero();
      assertThat(ib.stats().dropped()).containsEntry("unknown_engine_key", 0L);
    }
  }

  @Test
  void aRemovalResolvedLocallyRemovesTheEntryEvenIfTheServersMappingIsGone() {
    String ns = "local-removal";
    int[] tokens = BlockIndexContract.tokens(5, 4 * 16);
    long[] engine = BlockIndexContract.engine(16, tokens, null);
    AtomicLong clock = new AtomicLong();
    IndexConfig ic = IndexConfig.builder().modelName("m").build();
    try (RedisIndexClient a = RedisIndexClient.connect(config("a", clock).build())) {
      RedisBlockIndex ia = a.index(ic, ns);
      store(ia, "p0", tokens, engine);
      store(ia, "p1", tokens, engine);
      ia.flush();
      redis.del(array(keys(ns, "e")));
      ia.blockRemoved("p0", Arrays.copyOfRange(engine, 2, 4), null, 0);
      ia.flush();
      PrefixMatch m = ia.lookup(ia.requestKeys(tokens, (String) null), List.of("p0", "p1"));
      assertThat(m.matchedBlocks(m.indexOf("p0"))).isEqualTo(2);
      assertThat(m.matchedBlocks(m.indexOf("p1"))).isEqualTo(4);
      assertThat(ia.podEntries("p0")).containsEntry("GPU", 2L);
      assertThat(ia.stats().dropped()).containsEntry("unknown_engine_key", 0L);
    }
  }

  @Test
  void aBurstAppliedInSharedScriptCallsEndsAsTheInMemoryIndex() {
    String ns = "burst";
    IndexConfig ic = IndexConfig.builder().modelName("m").build();
    List<String> pods = List.of("p0", "p1", "p2", "p3", "p4");
    int[][] seqs = new int[3][];
    long[][] engine = new long[seqs.length][];
    for (int s = 0; s < seqs.length; s++) {
      seqs[s] = BlockIndexContract.tokens(40 + s, 8 * 16);
      engine[s] = BlockIndexContract.engine(16, seqs[s], null);
    }
    AtomicLong clock = new AtomicLong();
    BlockIndex ref = BlockIndex.inMemory(ic);
    try (RedisIndexClient a = RedisIndexClient.connect(config("a", clock).build())) {
      RedisBlockIndex ia = a.index(ic, ns);
      SplittableRandom rnd = new SplittableRandom(5);
      for (int round = 0; round < 20; round++) {
        // no flush inside a round: the writer drains the queue in batches, so one script call
        // often stores, removes and re-stores the same keys for several pods
        for (int step = 0; step < 40; step++) {
          String pod = pods.get(rnd.nextInt(pods.size()));
          int s = rnd.nextInt(seqs.length);
          int from = rnd.nextInt(8);
          int to = from + 1 + rnd.nextInt(8 - from);
          int op = rnd.nextInt(10);
          for (BlockIndex idx : List.of(ref, ia)) {
            if (op < 6) {
              idx.blockStored(
                  pod,
                  Arrays.copyOfRange(engine[s], from, to),
                  from > 0,
                  from > 0 ? engine[s][from - 1] : 0,
                  Arrays.copyOfRange(seqs[s], from * 16, to * 16),
                  16,
                  null,
                  null,
                  0);
            } else if (op < 9) {
              idx.blockRemoved(pod, Arrays.copyOfRange(engine[s], from, to), null, 0);
            } else {
              idx.allBlocksCleared(pod);
            }
          }
        }
        ia.flush();
        for (int[] seq : seqs) {
          PrefixMatch want = ref.lookup(ref.requestKeys(seq, (String) null), pods);
          PrefixMatch got = ia.lookup(ia.requestKeys(seq, (String) null), pods);
          for (String pod : pods) {
            assertThat(got.matchedBlocks(got.indexOf(pod)))
                .as("round %d, %s", round, pod)
                .isEqualTo(want.matchedBlocks(want.indexOf(pod)));
          }
        }
        for (String pod : pods) {
          assertThat(ia.podEntries(pod))
              .as("round %d, %s", round, pod)
              .isEqualTo(ref.podEntries(pod));
        }
      }
    }
  }
}
