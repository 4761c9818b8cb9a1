package io.kvroute.kvindex.redis;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.contract.BlockIndexContract;
import io.kvroute.kvindex.redis.RedisIndexConfig.IngestMode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Several replicas (each its own client, as separate gateway processes would have) sharing one
 * Redis: identical lookups whatever the ingestion mode, a replica started against a warm server
 * routes precisely from its first lookup, and a leased pod's writer fails over without losing the
 * events the old writer never wrote.
 */
class RedisSharedIndexTest {
  static RedisServer server;
  private static final IndexConfig INDEX = IndexConfig.builder().modelName("m").build();
  private static final List<String> PODS = List.of("p0", "p1", "p2", "p3", "p4", "p5");

  @BeforeAll
  static void start() {
    server = RedisServer.start();
  }

  @AfterAll
  static void stop() {
    if (server != null) {
      server.close();
    }
  }

  private static RedisIndexConfig.Builder replica(String id, IngestMode mode) {
    return RedisIndexConfig.builder()
        .url(server.url())
        .replicaId(id)
        .ingestMode(mode)
        .readYourWrites(true)
        .mappingCacheSize(4096)
        .lookupTimeout(java.time.Duration.ofSeconds(10))
        .commandTimeout(java.time.Duration.ofSeconds(10));
  }

  /** A random workload: stores of prefixes, offloads, removals, clears over 6 pods. */
  private static void feed(List<RedisBlockIndex> replicas, int[][] seqs, long[][] engine) {
    SplittableRandom rnd = new SplittableRandom(11);
    for (int step = 0; step < 300; step++) {
      String pod = PODS.get(rnd.nextInt(PODS.size()));
      int s = rnd.nextInt(seqs.length);
      int from = rnd.nextInt(8);
      int to = from + 1 + rnd.nextInt(8 - from);
      int op = rnd.nextInt(10);
      for (RedisBlockIndex idx : replicas) {
        if (op < 6) {
          idx.blockStored(
              pod,
              Arrays.copyOfRange(engine[s], from, to),
              from > 0,
              from > 0 ? engine[s][from - 1] : 0,
              Arrays.copyOfRange(seqs[s], from * 16, to * 16),
              16,
              null,
              op == 5 ? "CPU" : "GPU",
              0);
        } else if (op < 9) {
          idx.blockRemoved(pod, Arrays.copyOfRange(engine[s], from, to), null, 0);
        } else if (step % 7 == 0) {
          idx.allBlocksCleared(pod);
        }
      }
    }
    replicas.forEach(RedisBlockIndex::flush);
  }

  private static String decisions(RedisBlockIndex idx, int[][] seqs) {
    StringBuilder sb = new StringBuilder();
    for (int[] seq : seqs) {
      PrefixMatch m = idx.lookup(idx.requestKeys(seq, (String) null), PODS);
      for (int i = 0; i < m.size(); i++) {
        sb.append(m.podId(i))
            .append('=')
            .append(m.matchedBlocks(i))
            .append('/')
            .append(m.score(i))
            .append(' ');
      }
      sb.append('\n');
    }
    return sb.toString();
  }

  private static int[][] seqs() {
    int[][] seqs = new int[4][];
    for (int s = 0; s < seqs.length; s++) {
      seqs[s] = BlockIndexContract.tokens(s + 20, 8 * 16);
    }
    seqs[1] = seqs[0].clone();
    for (int i = 64; i < seqs[1].length; i++) {
      seqs[1][i]++;
    }
    return seqs;
  }

  private static long[][] engine(int[][] seqs) {
    long[][] e = new long[seqs.length][];
    for (int s = 0; s < seqs.length; s++) {
      e[s] = BlockIndexContract.engine(16, seqs[s], null);
    }
    return e;
  }

  @Test
  void replicasAgreeInEitherModeAndAWarmStartIsPreciseAtOnce() {
    int[][] seqs = seqs();
    long[][] engine = engine(seqs);
    List<String> outcomes = new ArrayList<>();
    for (IngestMode mode : IngestMode.values()) {
      String ns = "shared-" + mode;
      try (RedisIndexClient a = RedisIndexClient.connect(replica("a", mode).build());
          RedisIndexClient b = RedisIndexClient.connect(replica("b", mode).build())) {
        RedisBlockIndex ia = a.index(INDEX, ns);
        RedisBlockIndex ib = b.index(INDEX, ns);
        feed(List.of(ia, ib), seqs, engine);
        String da = decisions(ia, seqs);
        assertThat(decisions(ib, seqs)).isEqualTo(da);
        assertThat(da).contains("=8/").as("some pod holds a whole sequence");
        // a replica that never saw an event routes precisely from its first lookup
        try (RedisIndexClient c = RedisIndexClient.connect(replica("c", mode).build())) {
          assertThat(decisions(c.index(INDEX, ns), seqs)).isEqualTo(da);
        }
        if (mode == IngestMode.LEASED) {
          assertThat(ia.ownedPods()).isEqualTo(ia.pods()); // a wrote first: it holds every lease
          assertThat(ib.ownedPods()).isEmpty();
        }
        outcomes.add(da);
      }
    }
    // the same events give the same index in both modes (and as the in-memory index)
    assertThat(outcomes.get(1)).isEqualTo(outcomes.get(0));
  }

  @Test
  void aLeaseFailsOverAndTheNewWriterReplaysWhatItReceived() {
    int[][] seqs = seqs();
    long[][] engine = engine(seqs);
    String ns = "failover";
    Duration ttl = Duration.ofMillis(400);
    RedisIndexClient a =
        RedisIndexClient.connect(replica("a", IngestMode.LEASED).leaseTtl(ttl).build());
    RedisIndexClient b =
        RedisIndexClient.connect(replica("b", IngestMode.LEASED).leaseTtl(ttl).build());
    try {
      RedisBlockIndex ia = a.index(INDEX, ns);
      RedisBlockIndex ib = b.index(INDEX, ns);
      // both receive blocks 0-3; a writes them (first to take the lease), b buffers them
      for (RedisBlockIndex idx : List.of(ia, ib)) {
        idx.blockStored(
            "p0",
            Arrays.copyOf(engine[0], 4),
            false,
            0,
            Arrays.copyOf(seqs[0], 64),
            16,
            null,
            null,
            0);
      }
      ia.flush();
      assertThat(ia.ownedPods()).containsExactly("p0");
      // a goes away (its lease released); b receives blocks 4-7 and takes over
      a.close();
      ib.blockStored(
          "p0",
          Arrays.copyOfRange(engine[0], 4, 8),
          true,
          engine[0][3],
          Arrays.copyOfRange(seqs[0], 64, 128),
          16,
          null,
          null,
          0);
      Await.until("b to take p0's lease over", () -> ib.ownedPods().contains("p0"));
      ib.flush();
      PrefixMatch m = ib.lookup(ib.requestKeys(seqs[0], (String) null), List.of("p0"));
      assertThat(m.matchedBlocks(0)).isEqualTo(8);

      // fencing: a writer whose lease was taken is refused by Redis
      RedisIndexClient c =
          RedisIndexClient.connect(replica("c", IngestMode.LEASED).leaseTtl(ttl).build());
      try {
        RedisBlockIndex ic = c.index(INDEX, ns);
        b.close(); // releases p0
        ic.blockRemoved("p0", new long[] {engine[0][7]}, null, 0);
        ic.flush();
        assertThat(ic.ownedPods()).containsExactly("p0");
        assertThat(
                ic.lookup(ic.requestKeys(seqs[0], (String) null), List.of("p0")).matchedBlocks(0))
            .isEqualTo(7);
      } finally {
        c.close();
      }
    } finally {
      a.close();
      b.close();
    }
  }
}
