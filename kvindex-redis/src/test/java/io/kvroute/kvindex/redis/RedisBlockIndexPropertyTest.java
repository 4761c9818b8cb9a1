package io.kvroute.kvindex.redis;

import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.contract.BlockIndexPropertyContract;
import io.kvroute.kvindex.redis.RedisIndexConfig.IngestMode;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * The {@link BlockIndexPropertyContract} against a real redis-server (one namespace per example).
 */
class RedisBlockIndexPropertyTest extends BlockIndexPropertyContract {
  static RedisServer server;
  static RedisIndexClient client;
  static final AtomicInteger NS = new AtomicInteger();

  @BeforeAll
  static void start() {
    server = RedisServer.start();
    client =
        RedisIndexClient.connect(
            RedisIndexConfig.builder()
                .url(server.url())
                .readYourWrites(true)
                .mappingCacheSize(4096)
                .lookupTimeout(java.time.Duration.ofSeconds(10))
                .commandTimeout(java.time.Duration.ofSeconds(10))
                .ingestMode(IngestMode.ALL_REPLICAS)
                .build());
  }

  @AfterAll
  static void stop() {
    if (client != null) {
      client.close();
    }
    if (server != null) {
      server.close();
    }
  }

  @Override
  protected BlockIndex createIndex(IndexConfig config) {
    return client.index(config, "property-" + NS.incrementAndGet());
  }

  @Override
  protected int examples() {
    return 60; // each example is a fresh namespace on a shared server
  }
}
