package io.kvroute.kvindex.redis.internal;

import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;

/**
 * One connection to a standalone server or to a Redis Cluster (then one socket per node, each
 * command sent to the shard of its key's slot), behind the command interface both share.
 * Thread-safe, as Lettuce's connections are.
 */
final class Conn {
  private final StatefulConnection<byte[], byte[]> connection;
  private final RedisClusterAsyncCommands<byte[], byte[]> async;
  private final StatefulRedisClusterConnection<byte[], byte[]> cluster;
  private final StatefulRedisConnection<byte[], byte[]> standalone;

  Conn(StatefulRedisConnection<byte[], byte[]> c) {
    this.connection = c;
    this.async = c.async();
    this.standalone = c;
    this.cluster = null;
  }

  Conn(StatefulRedisClusterConnection<byte[], byte[]> c) {
    this.connection = c;
    this.async = c.async();
    this.cluster = c;
    this.standalone = null;
  }

  /** The commands (asynchronous; on a Cluster, routed by slot). */
  RedisClusterAsyncCommands<byte[], byte[]> async() {
    return async;
  }

  /** SCRIPT LOAD (on a Cluster: on every node; fails if one of them fails). */
  String scriptLoad(byte[] source) {
    return cluster != null
        ? cluster.sync().scriptLoad(source)
        : standalone.sync().scriptLoad(source);
  }

  /** Whether commands are sent only by {@link #flush()}. */
  void manualFlush() {
    connection.setAutoFlushCommands(false);
  }

  /** Sends the commands buffered since the last flush. */
  void flush() {
    connection.flushCommands();
  }

  void close() {
    connection.close();
  }

  void closeAsync() {
    connection.closeAsync();
  }
}
