package io.kvroute.kvindex.redis;

import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.contract.BlockIndexContract;
import io.kvroute.kvindex.redis.RedisIndexConfig.IngestMode;
import io.kvroute.kvindex.redis.RedisIndexConfig.LookupMode;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;

/**
 * The {@link BlockIndexContract} against a real redis-server: every replica writing (both lookup
 * modes) and the leased single writer.
 */
class RedisBlockIndexContractTest {
  static RedisServer server;
  static final AtomicInteger NS = new AtomicInteger();

  @BeforeAll
  static void startServer() {
    server = RedisServer.start();
  }

  @AfterAll
  static void stopServer() {
    if (server != null) {
      server.close();
    }
  }

  static RedisIndexConfig.Builder config() {
    return RedisIndexConfig.builder()
        .url(server.url())
        .readYourWrites(true)
        .mappingCacheSize(4096)
        .lookupTimeout(java.time.Duration.ofSeconds(10))
        .commandTimeout(java.time.Duration.ofSeconds(10));
  }

  abstract static class Backend extends BlockIndexContract {
    RedisIndexClient client;

    abstract RedisIndexConfig redisConfig();

    @Override
    protected BlockIndex createIndex(IndexConfig config) {
      if (client == null) {
        client = RedisIndexClient.connect(redisConfig());
      }
      return client.index(config, "contract-" + NS.incrementAndGet());
    }

    @Override
    protected boolean exactKeyCounts() {
      return false; // clears invalidate entries in O(1); their keys go later
    }

    @Override
    protected void closeIndexes() throws Exception {
      super.closeIndexes();
      if (client != null) {
        client.close();
        client = null;
      }
    }
  }

  @Nested
  class AllReplicasScript extends Backend {
    @Override
    RedisIndexConfig redisConfig() {
      return config().ingestMode(IngestMode.ALL_REPLICAS).lookupMode(LookupMode.SCRIPT).build();
    }
  }

  @Nested
  class AllReplicasMget extends Backend {
    @Override
    RedisIndexConfig redisConfig() {
      return config()
          .ingestMode(IngestMode.ALL_REPLICAS)
          .lookupMode(LookupMode.PIPELINED_MGET)
          .build();
    }
  }

  @Nested
  class Leased extends Backend {
    @Override
    RedisIndexConfig redisConfig() {
      return config().ingestMode(IngestMode.LEASED).build();
    }
  }
}
