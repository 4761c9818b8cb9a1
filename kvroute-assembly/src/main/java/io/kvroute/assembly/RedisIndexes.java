package io.kvroute.assembly;

import io.kvroute.config.ConfigException;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.redis.RedisBlockIndex;
import io.kvroute.kvindex.redis.RedisIndexConfig;
import io.micrometer.core.instrument.MeterRegistry;

/**
 * {@code index.backend: redis}. Its own class, so that nothing of the optional {@code
 * kvindex-redis} is loaded unless the setting is given.
 */
final class RedisIndexes {
  private RedisIndexes() {}

  /**
   * The shared index on Redis or Valkey that {@code index.redis} describes (closed by its owner).
   */
  static BlockIndex create(IndexConfig ic, RouterSettings.Redis r, MeterRegistry meters) {
    RedisIndexConfig.Builder b =
        RedisIndexConfig.builder()
            .url(r.url())
            .ingestMode(
                r.ingestMode().equals("leased")
                    ? RedisIndexConfig.IngestMode.LEASED
                    : RedisIndexConfig.IngestMode.ALL_REPLICAS)
            .meterRegistry(meters);
    if (r.keyPrefix() != null) {
      b.keyPrefix(r.keyPrefix());
    }
    if (r.entryTtl() != null) {
      b.entryTtl(r.entryTtl());
    }
    if (r.lookupTimeout() != null) {
      b.lookupTimeout(r.lookupTimeout());
    }
    if (r.replicaId() != null) {
      b.replicaId(r.replicaId());
    }
    RedisIndexConfig rc;
    try {
      rc = b.build();
    } catch (IllegalArgumentException e) {
      throw new ConfigException("index.redis", e.getMessage(), e);
    }
    return RedisBlockIndex.create(ic, rc);
  }
}
