package io.kvroute.kvindex.redis;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.contract.BlockIndexContract;
import io.kvroute.kvindex.redis.RedisIndexConfig.IngestMode;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Redis unreachable at start, stopped and restarted empty: lookups answer "no cache information"
 * and writes are dropped, both counted, nothing throws; the index recovers by itself (pods are
 * registered again after the data loss).
 */
class RedisDegradationTest {
  private static final int[] TOKENS = BlockIndexContract.tokens(3, 64);
  private static final long[] ENGINE = BlockIndexContract.engine(16, TOKENS, null);
  private static final List<String> PODS = List.of("a", "b");

  private static RedisIndexConfig config(int port, SimpleMeterRegistry reg) {
    return RedisIndexConfig.builder()
        .url("redis://127.0.0.1:" + port)
        .ingestMode(IngestMode.ALL_REPLICAS)
        .readYourWrites(true)
        .commandTimeout(Duration.ofSeconds(10))
        .lookupTimeout(Duration.ofSeconds(10))
        .mappingCacheSize(4096)
        .meterRegistry(reg)
        .build();
  }

  private static double unavailable(SimpleMeterRegistry reg) {
    return reg.find("kvroute.kvindex.redis.unavailable").functionCounters().stream()
        .mapToDouble(c -> c.count())
        .sum();
  }

  private static int matched(RedisBlockIndex idx) {
    PrefixMatch m = idx.lookup(idx.requestKeys(TOKENS, (String) null), PODS);
    return m.matchedBlocks("a");
  }

  @Test
  void unreachableAtStartAnswersNoCacheInformationThenRecovers() throws Exception {
    int port = RedisServer.freePort();
    SimpleMeterRegistry reg = new SimpleMeterRegistry();
    try (RedisIndexClient client = RedisIndexClient.connect(config(port, reg))) {
      RedisBlockIndex idx = client.index(IndexConfig.builder().build(), "degraded");
      assertThat(idx.available()).isFalse();
      idx.blockStored("a", ENGINE, false, 0, TOKENS, 16, null, null, 0);
      idx.blockRemoved("a", ENGINE, null, 0);
      idx.allBlocksCleared("a");
      assertThat(matched(idx)).isZero();
      assertThat(idx.stats().dropped().get("redis_unavailable")).isPositive();
      assertThat(idx.pods()).isEmpty();
      assertThat(unavailable(reg)).isPositive();

      try (RedisServer server = RedisServer.start(port)) {
        assertThat(server.ping()).isTrue();
        Await.until("the client to connect", idx::available);
        Await.until(
            "a store to be visible",
            () -> {
              idx.blockStored("a", ENGINE, false, 0, TOKENS, 16, null, null, 0);
              return matched(idx) == 4;
            });
        assertThat(idx.pods()).containsExactly("a");
      }
    }
  }

  @Test
  void serverRestartIsSurvivedAndDataLossRepairedByNewEvents() {
    SimpleMeterRegistry reg = new SimpleMeterRegistry();
    try (RedisServer server = RedisServer.start();
        RedisIndexClient client = RedisIndexClient.connect(config(server.port(), reg))) {
      RedisBlockIndex idx = client.index(IndexConfig.builder().build(), "restart");
      idx.blockStored("a", ENGINE, false, 0, TOKENS, 16, null, null, 0);
      assertThat(matched(idx)).isEqualTo(4);

      server.stop();
      double before = unavailable(reg);
      assertThat(matched(idx)).isZero(); // no cache information, no exception
      idx.blockStored("b", ENGINE, false, 0, TOKENS, 16, null, null, 0);
      assertThat(unavailable(reg)).isGreaterThan(before);
      assertThat(idx.available()).isFalse();

      server.restart(); // empty: no persistence
      Await.until("lookups to answer again", () -> matched(idx) == 0 && idx.available());
      // pod a's next event re-registers it (its id was lost with the data) and is indexed
      Await.until(
          "a new store to be visible",
          () -> {
            idx.blockStored("a", ENGINE, false, 0, TOKENS, 16, null, null, 0);
            return matched(idx) == 4;
          });
      assertThat(idx.pods()).contains("a");
      assertThat(idx.podEntries("a")).containsEntry("GPU", 4L);
    }
  }
}
