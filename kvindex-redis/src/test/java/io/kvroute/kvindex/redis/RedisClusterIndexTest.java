package io.kvroute.kvindex.redis;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.contract.BlockIndexContract;
import io.kvroute.kvindex.contract.FleetStateContract;
import io.kvroute.kvindex.fleet.FleetConfig;
import io.kvroute.kvindex.fleet.FleetState;
import io.kvroute.kvindex.fleet.FleetView;
import io.kvroute.kvindex.fleet.PodGroups;
import io.kvroute.kvindex.redis.RedisIndexConfig.IngestMode;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * One model's index over a real Redis Cluster of three masters (and one replica of the first) that
 * the test starts on loopback: pods in 6 groups, one hash tag each, spread over the shards; lookups
 * fan out and merge to what the in-memory index answers; replicas following 2 of 3 copies write
 * only their groups' pods; a master killed mid-run degrades the lookups of its groups only, nothing
 * hangs, and writes resume after a restart (no replica) or a failover (with one). The fleet state
 * works through the same Cluster client (its keys on one shard).
 *
 * <p>The methods run in order on one cluster (the later ones kill nodes).
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class RedisClusterIndexTest {
  static RedisCluster cluster;
  private static final int GROUPS = 6;
  private static final int PODS = 12;
  private static final List<String> POD_NAMES = new ArrayList<>();
  private static final int[][] SEQS = new int[4][];
  private static final long[][] ENGINE = new long[4][];

  static {
    for (int i = 0; i < PODS; i++) {
      POD_NAMES.add("pod-" + i);
    }
    for (int s = 0; s < SEQS.length; s++) {
      SEQS[s] = BlockIndexContract.tokens(100 + s, 16 * 8);
      ENGINE[s] = BlockIndexContract.engine(16, SEQS[s], null);
    }
  }

  @BeforeAll
  static void start() {
    cluster = RedisCluster.start(3, 1);
  }

  @AfterAll
  static void stop() {
    if (cluster != null) {
      cluster.close();
    }
  }

  private static RedisIndexConfig.Builder config(String replica) {
    return RedisIndexConfig.builder()
        .url(cluster.url())
        .cluster(true)
        .podGroups(PodGroups.of(GROUPS))
        .replicaId(replica)
        .leaseTtl(Duration.ofSeconds(2))
        .mappingCacheSize(4096)
        .commandTimeout(Duration.ofSeconds(2))
        .lookupTimeout(Duration.ofSeconds(2));
  }

  private static RedisBlockIndex index(
      String namespace, String replica, UnaryOperator<RedisIndexConfig.Builder> tweak) {
    return RedisBlockIndex.create(
        IndexConfig.builder().modelName(namespace).build(), tweak.apply(config(replica)).build());
  }

  /** Pod i holds the first (i % 8) + 1 blocks of sequence {@code s}. */
  private static void store(BlockIndex idx, String pod, int s) {
    int i = Integer.parseInt(pod.substring(4));
    int blocks = i % 8 + 1;
    idx.blockStored(
        pod,
        Arrays.copyOf(ENGINE[s], blocks),
        false,
        0,
        Arrays.copyOf(SEQS[s], blocks * 16),
        16,
        null,
        null,
        0);
  }

  private static int[] matches(BlockIndex idx, int s) {
    PrefixMatch m = idx.lookup(idx.requestKeys(SEQS[s], (String) null), POD_NAMES);
    int[] out = new int[PODS];
    for (int i = 0; i < PODS; i++) {
      out[i] = m.matchedBlocks(POD_NAMES.get(i));
    }
    return out;
  }

  private static int[] expected(Set<String> pods) {
    int[] out = new int[PODS];
    for (int i = 0; i < PODS; i++) {
      out[i] = pods.contains(POD_NAMES.get(i)) ? i % 8 + 1 : 0;
    }
    return out;
  }

  /** The pods whose group lives on {@code node}. */
  private static Set<String> podsOn(RedisBlockIndex idx, RedisCluster.Node node) {
    Set<String> out = new TreeSet<>();
    for (String p : POD_NAMES) {
      if (cluster.masterOf(cluster.slot(idx.hashTag(p))) == node) {
        out.add(p);
      }
    }
    return out;
  }

  @Test
  @Order(1)
  void aModelSpreadsOverTheShardsAndLookupsMergeToTheInMemoryAnswer() {
    try (RedisBlockIndex idx = index("spread", "r0", b -> b.readYourWrites(true))) {
      BlockIndex ref = BlockIndex.inMemory(IndexConfig.builder().modelName("spread").build());
      for (String p : POD_NAMES) {
        store(idx, p, 0);
        store(ref, p, 0);
      }
      idx.flush();
      assertThat(matches(idx, 0)).containsExactly(matches(ref, 0));
      assertThat(matches(idx, 0)).containsExactly(expected(new HashSet<>(POD_NAMES)));
      assertThat(idx.pods()).containsExactlyInAnyOrderElementsOf(POD_NAMES);
      assertThat(idx.stats().entries()).isEqualTo(ref.stats().entries());
      // six tags, evenly over the three masters' slot ranges: every master holds keys
      Set<String> tags = new TreeSet<>();
      for (String p : POD_NAMES) {
        tags.add(idx.hashTag(p));
      }
      assertThat(tags).hasSizeGreaterThan(1);
      for (RedisCluster.Node n : cluster.nodes().subList(0, 3)) {
        long keys = Long.parseLong(cluster.cli(n.port(), "dbsize").trim());
        assertThat(keys).as("keys on master %d", n.port()).isPositive();
      }
    }
  }

  @Test
  @Order(2)
  void theFleetStateLivesOnOneShardOfTheCluster() {
    try (RedisIndexClient a = RedisIndexClient.connect(config("a").build());
        RedisIndexClient b = RedisIndexClient.connect(config("b").build())) {
      FleetConfig.Builder cfg =
          FleetConfig.builder()
              .fleet("cluster")
              .speculativeStride(1)
              .viewTimeout(Duration.ofSeconds(2));
      FleetState fa = a.fleet(cfg.replicaId("a").build());
      FleetState fb = b.fleet(cfg.replicaId("b").build());
      long[] k = FleetStateContract.keys(3, 8);
      fa.requestStarted("e1", 40);
      fa.speculate("e1", k, 8);
      fb.requestStarted("e1", 2);
      Await.until(
          "b to see a through the cluster",
          () -> {
            FleetView v = fb.view(List.of("e1"), k, 8);
            return v.source() == FleetView.Source.FLEET
                && v.inFlightRequests(0) == 2
                && v.inFlightTokens(0) == 42
                && v.speculativeBlocks(0) == 8;
          });
    }
  }

  @Test
  @Order(3)
  void replicasFollowOnlyTheirGroupsWithTwoCopiesPerPod() {
    SimpleMeterRegistry reg = new SimpleMeterRegistry();
    List<RedisBlockIndex> replicas = new ArrayList<>();
    List<PodGroups> follows = new ArrayList<>();
    try {
      for (int r = 0; r < 3; r++) {
        PodGroups mine = PodGroups.of(GROUPS).followedBy(r, 3, 2);
        follows.add(mine);
        int rr = r;
        replicas.add(
            index(
                "follow",
                "r" + r,
                b ->
                    b.ingestMode(IngestMode.LEASED)
                        .podGroups(mine)
                        .meterRegistry(rr == 0 ? reg : null)));
      }
      // each replica receives the events of the pods it follows (its subscriptions)
      for (String p : POD_NAMES) {
        int followers = 0;
        for (int r = 0; r < 3; r++) {
          if (follows.get(r).follows(p)) {
            store(replicas.get(r), p, 1);
            followers++;
          }
        }
        assertThat(followers).as("followers of %s", p).isEqualTo(2);
      }
      replicas.forEach(RedisBlockIndex::flush);
      Await.until(
          "every replica to see every pod",
          () -> {
            replicas.forEach(RedisBlockIndex::flush);
            for (RedisBlockIndex idx : replicas) {
              if (!Arrays.equals(matches(idx, 1), expected(new HashSet<>(POD_NAMES)))) {
                return false;
              }
            }
            return true;
          });
      // one writer per pod, always one of its followers
      Set<String> owned = new TreeSet<>();
      for (int r = 0; r < 3; r++) {
        for (String p : replicas.get(r).ownedPods()) {
          assertThat(follows.get(r).follows(p)).as("r%d writes %s", r, p).isTrue();
          assertThat(owned.add(p)).as("%s has one writer", p).isTrue();
        }
      }
      assertThat(owned).containsExactlyInAnyOrderElementsOf(POD_NAMES);
      // an event of a pod it does not follow is dropped and counted, not written
      RedisBlockIndex r0 = replicas.get(0);
      String stranger =
          POD_NAMES.stream().filter(p -> !follows.get(0).follows(p)).findFirst().get();
      store(r0, stranger, 2);
      assertThat(r0.stats().dropped().get("not_followed")).isPositive();
    } finally {
      replicas.forEach(RedisBlockIndex::close);
    }
  }

  /** Waits until new events of {@code pods} (sequence 3) are visible, reporting what it saw. */
  private static void awaitWritesOf(RedisBlockIndex idx, Set<String> pods, String what) {
    String[] last = {""};
    try {
      Await.until(
          what,
          () -> {
            for (String p : pods) {
              store(idx, p, 3);
            }
            idx.flush();
            int[] m = matches(idx, 3);
            last[0] =
                Arrays.toString(m) + " " + idx.stats().dropped() + " owned " + idx.ownedPods();
            for (String p : pods) {
              int i = POD_NAMES.indexOf(p);
              if (m[i] != i % 8 + 1) {
                return false;
              }
            }
            return true;
          });
    } catch (AssertionError e) {
      throw new AssertionError(e.getMessage() + "; pods " + pods + ", last: " + last[0], e);
    }
  }

  /** Stores fresh events for every pod in a loop (new content each round) until stopped. */
  private static Thread ingest(RedisBlockIndex idx, AtomicBoolean running, AtomicLong rounds) {
    Thread t =
        new Thread(
            () -> {
              int round = 0;
              while (running.get()) {
                int[] tokens = BlockIndexContract.tokens(10_000 + round, 16 * 4);
                long[] engine = BlockIndexContract.engine(16, tokens, null);
                for (String p : POD_NAMES) {
                  idx.blockStored(p, engine, false, 0, tokens, 16, null, null, 0);
                }
                round++;
                rounds.incrementAndGet();
                LockSupport.parkNanos(10_000_000L); // a fleet's pace, not a flood of the queue
              }
            },
            "cluster-test-ingest");
    t.setDaemon(true);
    t.start();
    return t;
  }

  @Test
  @Order(4)
  void aMasterKilledMidRunDegradesOnlyItsGroupsAndWritesResumeAfterItsRestart() throws Exception {
    SimpleMeterRegistry reg = new SimpleMeterRegistry();
    IndexConfig ic = IndexConfig.builder().modelName("restart").meterRegistry(reg).build();
    try (RedisBlockIndex idx =
        RedisBlockIndex.create(ic, config("r0").ingestMode(IngestMode.LEASED).build())) {
      for (String p : POD_NAMES) {
        store(idx, p, 0);
      }
      idx.flush();
      Await.until(
          "the index to hold every pod",
          () -> Arrays.equals(matches(idx, 0), expected(new HashSet<>(POD_NAMES))));
      RedisCluster.Node victim = cluster.nodes().get(1); // a master without a replica
      Set<String> dead = podsOn(idx, victim);
      Set<String> live = new TreeSet<>(POD_NAMES);
      live.removeAll(dead);
      assertThat(dead).isNotEmpty();
      assertThat(live).isNotEmpty();

      AtomicBoolean running = new AtomicBoolean(true);
      AtomicLong rounds = new AtomicLong();
      Thread ingest = ingest(idx, running, rounds);
      try {
        cluster.kill(victim);
        // lookups keep answering: the live groups exactly, the dead ones "no information"
        for (int i = 0; i < 10; i++) {
          assertThat(matches(idx, 0)).containsExactly(expected(live));
        }
        assertThat(reg.get("kvroute.kvindex.redis.lookups.partial").functionCounter().count())
            .isPositive();
        long before = rounds.get();
        Await.until("ingestion to go on while the master is dead", () -> rounds.get() > before + 2);

        cluster.restart(victim); // empty: it lost its keys, the registry of its groups included
        cluster.awaitOk();
        // new events of the dead groups' pods are written again (re-registered, leases retaken)
        awaitWritesOf(idx, dead, "writes of the restarted shard's pods to resume");
      } finally {
        running.set(false);
        ingest.join(60_000);
      }
      assertThat(ingest.isAlive()).as("the ingesting thread finished: nothing hangs").isFalse();
    }
  }

  @Test
  @Order(5)
  void aMasterKilledMidRunFailsOverToItsReplicaAndWritesResume() throws Exception {
    try (RedisBlockIndex idx = index("failover", "r0", b -> b.ingestMode(IngestMode.LEASED))) {
      for (String p : POD_NAMES) {
        store(idx, p, 0);
      }
      idx.flush();
      Await.until(
          "the index to hold every pod",
          () -> Arrays.equals(matches(idx, 0), expected(new HashSet<>(POD_NAMES))));
      RedisCluster.Node victim = cluster.nodes().get(0); // the master with a replica
      Set<String> dead = podsOn(idx, victim);
      assertThat(dead).isNotEmpty();
      int slot = cluster.slot(idx.hashTag(dead.iterator().next()));

      AtomicBoolean running = new AtomicBoolean(true);
      AtomicLong rounds = new AtomicLong();
      Thread ingest = ingest(idx, running, rounds);
      try {
        cluster.kill(victim);
        matches(idx, 0); // answers, whatever the failover's progress
        RedisCluster.Node promoted = cluster.awaitFailover(slot, victim);
        assertThat(promoted).isNotSameAs(victim);
        awaitWritesOf(idx, dead, "writes of the failed-over shard's pods to resume");
        cluster.restart(victim); // comes back as a replica of the promoted node
        cluster.awaitOk();
      } finally {
        running.set(false);
        ingest.join(60_000);
      }
      assertThat(ingest.isAlive()).as("the ingesting thread finished: nothing hangs").isFalse();
    }
  }
}
