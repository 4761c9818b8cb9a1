package io.kvroute.assembly;

import io.kvroute.config.ConfigException;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.fleet.FleetConfig;
import io.kvroute.kvindex.fleet.FleetState;
import io.kvroute.kvindex.fleet.PodGroups;
import io.kvroute.kvindex.redis.RedisBlockIndex;
import io.kvroute.kvindex.redis.RedisIndexClient;
import io.kvroute.kvindex.redis.RedisIndexConfig;
import io.micrometer.core.instrument.MeterRegistry;

/**
 * {@code index.backend: redis} and {@code fleet}. Its own class, so that nothing of the optional
 * {@code kvindex-redis} is loaded unless the setting is given.
 */
final class RedisIndexes {
  private RedisIndexes() {}

  /**
   * The shared index (and, with {@code fleet}, the fleet state) on Redis or Valkey: closing {@code
   * owner} closes both.
   */
  record Shared(BlockIndex index, FleetState fleet, AutoCloseable owner) {}

  /**
   * The shared index on Redis or Valkey that {@code index.redis} describes, and the fleet state
   * {@code fleet} describes (null: none), on one client.
   */
  static Shared create(
      IndexConfig ic, RouterSettings.Redis r, RouterSettings.Fleet fleet, MeterRegistry meters) {
    RedisIndexConfig.Builder b =
        RedisIndexConfig.builder()
            .url(r.url())
            .cluster(r.cluster())
            .podGroups(PodGroups.of(r.podGroups()))
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
    if (fleet == null) {
      RedisBlockIndex index = RedisBlockIndex.create(ic, rc);
      return new Shared(index, null, index);
    }
    FleetConfig fc = fleet.config(r.replicaId()).toBuilder().meterRegistry(meters).build();
    RedisIndexClient client = RedisIndexClient.connect(rc);
    try {
      return new Shared(client.index(ic), client.fleet(fc), client);
    } catch (RuntimeException e) {
      client.close();
      throw e;
    }
  }
}
