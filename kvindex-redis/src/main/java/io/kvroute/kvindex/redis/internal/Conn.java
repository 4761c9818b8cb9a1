package io.kvroute.kvindex.redis.internal;

import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

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

  /**
   * On a Cluster, opens the connection to every known master: Lettuce opens a node's connection
   * with the first command for it, and rejects the commands sent meanwhile (the client rejects
   * rather than queues while disconnected). With {@code wait}, waits (at most {@code waitMillis} in
   * all) for them; a node that cannot be reached is skipped (opened when it answers again).
   * Connections already open are reused: cheap to call again after a topology change.
   */
  void warm(boolean wait, long waitMillis) {
    if (cluster == null) {
      return;
    }
    List<CompletableFuture<?>> pending = new ArrayList<>();
    for (RedisClusterNode n : cluster.getPartitions()) {
      if (n.is(RedisClusterNode.NodeFlag.UPSTREAM) && !n.is(RedisClusterNode.NodeFlag.FAIL)) {
        try {
          // by host and port: the connections commands are routed to (by slot) are keyed so
          pending.add(cluster.getConnectionAsync(n.getUri().getHost(), n.getUri().getPort()));
        } catch (RuntimeException e) {
          // unknown or down: opened when it answers again
        }
      }
    }
    if (!wait) {
      return;
    }
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(waitMillis);
    for (CompletableFuture<?> f : pending) {
      try {
        f.get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
      } catch (ExecutionException | TimeoutException e) {
        // that node is down or slow
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
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
