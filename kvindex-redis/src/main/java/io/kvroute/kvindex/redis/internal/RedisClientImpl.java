package io.kvroute.kvindex.redis.internal;

import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.fleet.FleetConfig;
import io.kvroute.kvindex.fleet.FleetState;
import io.kvroute.kvindex.redis.RedisBlockIndex;
import io.kvroute.kvindex.redis.RedisIndexClient;
import io.kvroute.kvindex.redis.RedisIndexConfig;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.RedisNoScriptException;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SocketOptions;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.ClusterTopologyRefreshOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import io.lettuce.core.codec.ByteArrayCodec;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.DefaultClientResources;
import io.lettuce.core.resource.Delay;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The {@link RedisIndexClient}: a Lettuce client with two connections (lookups and reads,
 * auto-flushed; writes, flushed per batch by the writer thread), a bounded write queue, a scheduler
 * thread (reconnection while the server is unreachable, lease renewals) and the Lua scripts.
 *
 * <p><b>Thread-safety.</b> Thread-safe. The write queue is the hand-over point: ops are built by
 * ingesting threads and only the writer thread sends them; {@link #flush(long)} waits on the
 * writer's progress.
 */
public final class RedisClientImpl implements RedisIndexClient {
  private static final Logger LOG = LoggerFactory.getLogger(RedisClientImpl.class);
  private static final int MAX_GROUP_OPS = 128;
  private static final int REQUEST_QUEUE = 16_384;
  private static final int MAX_GROUP_KEYS = 4096;

  final RedisIndexConfig config;
  final Scripts scripts = new Scripts();
  final Health health;
  private final ClientResources resources;
  private final RedisClient client; // standalone, or null
  private final RedisClusterClient clusterClient; // cluster, or null
  private final Object connectLock = new Object();
  private volatile Conn readConn;
  private volatile Conn writeConn;
  private final ArrayBlockingQueue<Op> queue;
  private final AtomicLong submitted = new AtomicLong();
  private volatile long applied;
  private final ReentrantLock progressLock = new ReentrantLock();
  private final Condition progress = progressLock.newCondition();
  private final Thread writer;
  private final ScheduledExecutorService scheduler;
  private final List<RedisIndexImpl> indexes = new CopyOnWriteArrayList<>();
  private final List<RedisFleet> fleets = new CopyOnWriteArrayList<>();
  private final LongAdder queueDropped = new LongAdder();
  private final LongAdder batches = new LongAdder();
  private final LongAdder opsSent = new LongAdder();
  private volatile boolean running = true;

  /**
   * Connects (see {@link RedisIndexClient#connect}). Lettuce 7 marks the adaptive-refresh trigger
   * setters deprecated without a replacement in this version; they are what makes a client follow a
   * failover within a second, hence the suppression.
   */
  @SuppressWarnings("deprecation")
  public RedisClientImpl(RedisIndexConfig config) {
    this.config = Objects.requireNonNull(config, "config");
    List<RedisURI> uris = new ArrayList<>();
    for (String one : config.url().split(",")) {
      String url = one.trim();
      if (url.startsWith("valkey://")) {
        url = "redis://" + url.substring("valkey://".length());
      }
      RedisURI uri = RedisURI.create(url);
      uri.setTimeout(config.commandTimeout());
      uris.add(uri);
    }
    String where = uris.get(0).getHost() + ":" + uris.get(0).getPort();
    this.health = new Health(config.cluster() ? "Cluster (seed " + where + ")" : "at " + where);
    this.resources =
        DefaultClientResources.builder()
            .ioThreadPoolSize(config.cluster() ? 2 : 1)
            .computationThreadPoolSize(1)
            .reconnectDelay(
                Delay.exponential(
                    Duration.ofMillis(10), Duration.ofSeconds(1), 2, TimeUnit.MILLISECONDS))
            .build();
    SocketOptions socket =
        SocketOptions.builder()
            .connectTimeout(min(config.commandTimeout(), Duration.ofSeconds(2)))
            .tcpNoDelay(true)
            .build();
    if (config.cluster()) {
      this.client = null;
      this.clusterClient = RedisClusterClient.create(resources, uris);
      clusterClient.setOptions(
          ClusterClientOptions.builder()
              .autoReconnect(true)
              .requestQueueSize(REQUEST_QUEUE)
              .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
              .socketOptions(socket)
              .timeoutOptions(TimeoutOptions.enabled(config.commandTimeout()))
              // follow failovers: re-read the topology periodically, and at once (at most once a
              // second) on MOVED/ASK redirects and on a node that keeps failing to reconnect
              .topologyRefreshOptions(
                  ClusterTopologyRefreshOptions.builder()
                      .enablePeriodicRefresh(config.clusterRefresh())
                      .enableAdaptiveRefreshTrigger(
                          ClusterTopologyRefreshOptions.RefreshTrigger.MOVED_REDIRECT,
                          ClusterTopologyRefreshOptions.RefreshTrigger.ASK_REDIRECT,
                          ClusterTopologyRefreshOptions.RefreshTrigger.PERSISTENT_RECONNECTS,
                          ClusterTopologyRefreshOptions.RefreshTrigger.UNCOVERED_SLOT,
                          ClusterTopologyRefreshOptions.RefreshTrigger.UNKNOWN_NODE)
                      .adaptiveRefreshTriggersTimeout(Duration.ofSeconds(1))
                      .refreshTriggersReconnectAttempts(3)
                      .closeStaleConnections(true)
                      .build())
              .build());
    } else {
      this.clusterClient = null;
      this.client = RedisClient.create(resources, uris.get(0));
      client.setOptions(
          ClientOptions.builder()
              .autoReconnect(true)
              // commands awaiting a reply per connection: lookups that timed out stay queued until
              // the server answers; beyond this bound new ones fail at once (counted, degraded)
              .requestQueueSize(REQUEST_QUEUE)
              .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
              .socketOptions(socket)
              .timeoutOptions(TimeoutOptions.enabled(config.commandTimeout()))
              .build());
    }
    this.queue = new ArrayBlockingQueue<>(config.writeQueueCapacity());
    this.scheduler =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "kvindex-redis-scheduler");
              t.setDaemon(true);
              return t;
            });
    this.writer = new Thread(this::writeLoop, "kvindex-redis-writer");
    writer.setDaemon(true);
    tryConnect();
    writer.start();
    long period = Math.max(20, Math.min(1000, config.leaseTtl().toMillis() / 3));
    scheduler.scheduleWithFixedDelay(this::maintain, period, period, TimeUnit.MILLISECONDS);
    config.meterRegistry().ifPresent(this::bindMeters);
  }

  private static Duration min(Duration a, Duration b) {
    return a.compareTo(b) < 0 ? a : b;
  }

  // ------------------------------------------------------------------ connections

  private void tryConnect() {
    synchronized (connectLock) {
      if (readConn != null || !running) {
        return;
      }
      Conn r = null;
      Conn w = null;
      try {
        r = newConnection();
        w = newConnection();
        w.manualFlush();
        loadScripts(r);
        readConn = r;
        writeConn = w;
        health.ok();
      } catch (RuntimeException e) {
        health.failed("connect", e);
        if (r != null) {
          r.closeAsync();
        }
        if (w != null) {
          w.closeAsync();
        }
      }
    }
  }

  /** A new connection (to the server, or to the Cluster); throws if it cannot be made. */
  Conn newConnection() {
    if (clusterClient != null) {
      Conn c = new Conn(clusterClient.connect(ByteArrayCodec.INSTANCE));
      c.warm(true, config.commandTimeout().toMillis());
      return c;
    }
    return new Conn(client.connect(ByteArrayCodec.INSTANCE));
  }

  /**
   * Loads the scripts. On a Cluster a node that is down makes it fail: that must not keep the
   * client from connecting (a script missing on a node is sent whole on NOSCRIPT).
   */
  private void loadScripts(Conn c) {
    try {
      scripts.load(c::scriptLoad);
    } catch (RuntimeException e) {
      if (clusterClient == null) {
        throw e;
      }
      LOG.debug(
          "kvindex: SCRIPT LOAD failed on a Cluster node; scripts will be sent on NOSCRIPT", e);
    }
  }

  private void maintain() {
    try {
      if (readConn == null) {
        tryConnect();
      } else if (clusterClient != null) {
        // after a failover the new master's connection would open with the first command
        readConn.warm(false, 0);
        writeConn.warm(false, 0);
      }
      for (RedisIndexImpl idx : indexes) {
        idx.maintain();
      }
    } catch (RuntimeException e) {
      LOG.debug("kvindex: Redis maintenance failed", e);
    }
  }

  /** The auto-flushed connection's commands, or null while not connected. */
  RedisClusterAsyncCommands<byte[], byte[]> reads() {
    Conn c = readConn;
    return c == null ? null : c.async();
  }

  /** Reloads the scripts (the server, or a Cluster node, restarted and lost them). */
  void reloadScripts() {
    for (RedisIndexImpl idx : indexes) {
      idx.writes.forgetWrites(); // what the lost scripts wrote may be lost too
    }
    Conn c = readConn;
    if (c != null) {
      try {
        loadScripts(c);
      } catch (RuntimeException e) {
        LOG.debug("kvindex: SCRIPT LOAD failed", e);
      }
    }
  }

  /** Whether the client speaks to a Redis Cluster. */
  boolean isCluster() {
    return clusterClient != null;
  }

  /**
   * Awaits a reply: the result, or throws {@link Unavailable} (counted for {@code op}) on timeout
   * or failure. NOSCRIPT is passed up so that callers can reload the scripts and retry.
   */
  <T> T await(RedisFuture<T> f, Duration timeout, String op) {
    try {
      T t = f.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
      health.ok();
      return t;
    } catch (ExecutionException e) {
      Throwable c = e.getCause();
      if (c instanceof RedisNoScriptException) {
        throw (RedisNoScriptException) c;
      }
      health.failed(op, c);
      throw new Unavailable(c);
    } catch (TimeoutException e) {
      f.cancel(false);
      health.failed(op, e);
      throw new Unavailable(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new Unavailable(e);
    } catch (RuntimeException e) {
      health.failed(op, e);
      throw new Unavailable(e);
    }
  }

  /** A synchronous call on the read connection, reloading the scripts once on NOSCRIPT. */
  <T> T call(
      java.util.function.Function<RedisClusterAsyncCommands<byte[], byte[]>, RedisFuture<T>> cmd,
      Duration timeout,
      String op) {
    RedisClusterAsyncCommands<byte[], byte[]> c = reads();
    if (c == null) {
      health.failed(op, null);
      throw new Unavailable(null);
    }
    try {
      return await(cmd.apply(c), timeout, op);
    } catch (RedisNoScriptException e) {
      reloadScripts();
      return await(cmd.apply(c), timeout, op);
    }
  }

  /** Thrown (without a stack trace) when the server did not answer. */
  static final class Unavailable extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Unavailable(Throwable cause) {
      super("Redis unavailable", cause, false, false);
    }
  }

  // ------------------------------------------------------------------ writes

  /** Queues a write; false (and the op is dropped) when the queue is full. */
  boolean submit(Op op) {
    synchronized (queue) {
      op.seq = submitted.get() + 1;
      if (!queue.offer(op)) {
        queueDropped.increment();
        return false;
      }
      submitted.incrementAndGet();
    }
    return true;
  }

  /** The sequence number of the last submitted write. */
  long submittedSeq() {
    return submitted.get();
  }

  /** Waits until writes up to {@code seq} were applied (or dropped), bounded by the timeouts. */
  void flush(long seq) {
    long deadline =
        config.nanoClock().getAsLong() + config.commandTimeout().toNanos() * 4 + 1_000_000_000L;
    progressLock.lock();
    try {
      while (applied < seq && running) {
        long left = deadline - config.nanoClock().getAsLong();
        if (left <= 0) {
          return;
        }
        progress.awaitNanos(Math.min(left, 50_000_000L));
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      progressLock.unlock();
    }
  }

  private void writeLoop() {
    List<Op> batch = new ArrayList<>(config.writeBatch());
    while (running || !queue.isEmpty()) {
      Op first;
      try {
        first = queue.poll(50, TimeUnit.MILLISECONDS);
      } catch (InterruptedException e) {
        if (!running) {
          break;
        }
        continue;
      }
      if (first == null) {
        continue;
      }
      batch.clear();
      batch.add(first);
      queue.drainTo(batch, config.writeBatch() - 1);
      try {
        send(batch);
      } catch (RuntimeException e) {
        LOG.warn("kvindex: Redis write batch failed unexpectedly", e);
      }
      long last = batch.get(batch.size() - 1).seq;
      progressLock.lock();
      try {
        applied = last;
        progress.signalAll();
      } finally {
        progressLock.unlock();
      }
    }
  }

  private void send(List<Op> batch) {
    Conn w = writeConn;
    if (w == null) {
      health.failed("write", null);
      for (Op op : batch) {
        op.dropped("redis_unavailable");
      }
      return;
    }
    RedisClusterAsyncCommands<byte[], byte[]> c = w.async();
    // the writes of one index and pod group between two other ops go in one script call, in
    // their order (its fixed cost shared; one group's keys are in one slot). A pod's writes are
    // all in its group's call, so each pod's order is kept; writes of different groups touch
    // different keys and may be applied in either order.
    List<List<Op>> groups = new ArrayList<>();
    List<RedisFuture<List<Object>>> f = new ArrayList<>();
    Map<Object, List<WriteOp>> byGroup = new LinkedHashMap<>();
    for (int i = 0; i <= batch.size(); i++) {
      Op op = i < batch.size() ? batch.get(i) : null;
      if (op instanceof WriteOp wo) {
        byGroup.computeIfAbsent(List.of(wo.index, wo.pg), k -> new ArrayList<>()).add(wo);
        continue;
      }
      for (List<WriteOp> g : byGroup.values()) {
        int from = 0;
        while (from < g.size()) {
          int to = from;
          int keys = 0;
          while (to < g.size() && to - from < MAX_GROUP_OPS && keys < MAX_GROUP_KEYS) {
            keys += g.get(to++).keys.length;
          }
          List<WriteOp> part = new ArrayList<>(g.subList(from, to));
          groups.add(new ArrayList<>(part));
          f.add(part.get(0).index.dispatchWrites(c, part));
          from = to;
        }
      }
      byGroup.clear();
      if (op != null) {
        groups.add(List.of(op));
        f.add(op.dispatch(c));
      }
    }
    w.flush();
    batches.increment();
    opsSent.add(batch.size());
    for (int gi = 0; gi < groups.size(); gi++) {
      List<Op> g = groups.get(gi);
      List<Object> reply;
      try {
        try {
          reply = await(f.get(gi), config.commandTimeout(), "write");
        } catch (RedisNoScriptException e) {
          reloadScripts();
          reply = null; // applied one by one below
        }
      } catch (Unavailable e) {
        g.forEach(op -> op.dropped("redis_unavailable"));
        continue;
      } catch (RuntimeException e) {
        LOG.debug("kvindex: Redis write failed", e);
        health.failed("write", e);
        g.forEach(op -> op.dropped("redis_unavailable"));
        continue;
      }
      int at = 0;
      for (Op op : g) {
        try {
          List<Object> r;
          if (reply == null) {
            r = retry(op);
          } else if (op instanceof WriteOp) {
            int u = (int) Bytes.parseLong(reply.get(at + 4));
            r = reply.subList(at, at + 5 + u);
            at += 5 + u;
          } else {
            r = reply;
          }
          if (!op.done(r)) {
            op.done(retry(op)); // re-registered: once more
          }
        } catch (Unavailable e) {
          op.dropped("redis_unavailable");
        } catch (RuntimeException e) {
          LOG.debug("kvindex: Redis write failed", e);
          health.failed("write", e);
          op.dropped("redis_unavailable");
        }
      }
    }
  }

  private List<Object> retry(Op op) {
    return call(op::dispatch, config.commandTimeout(), "write");
  }

  // ------------------------------------------------------------------ indexes

  @Override
  public RedisBlockIndex index(IndexConfig config) {
    return index(config, null);
  }

  @Override
  public RedisBlockIndex index(IndexConfig indexConfig, String namespace) {
    return attach(new RedisIndexImpl(this, indexConfig, namespace, false));
  }

  /** An index that owns this client (closing it closes the client). */
  public RedisBlockIndex ownedIndex(IndexConfig indexConfig, String namespace) {
    return attach(new RedisIndexImpl(this, indexConfig, namespace, true));
  }

  private RedisBlockIndex attach(RedisIndexImpl idx) {
    if (!running) {
      throw new IllegalStateException("RedisIndexClient is closed");
    }
    indexes.add(idx);
    return idx;
  }

  void detach(RedisIndexImpl idx) {
    indexes.remove(idx);
  }

  @Override
  public FleetState fleet(FleetConfig fleetConfig) {
    if (!running) {
      throw new IllegalStateException("RedisIndexClient is closed");
    }
    RedisFleet f = new RedisFleet(this, fleetConfig);
    fleets.add(f);
    return f;
  }

  void detach(RedisFleet f) {
    fleets.remove(f);
  }

  ScheduledExecutorService scheduler() {
    return scheduler;
  }

  @Override
  public boolean available() {
    return readConn != null && health.available();
  }

  @Override
  public RedisIndexConfig config() {
    return config;
  }

  @Override
  public void close() {
    if (!running) {
      return;
    }
    flush(submittedSeq());
    for (RedisFleet f : fleets) {
      f.close();
    }
    for (RedisIndexImpl idx : indexes) {
      idx.releaseLeases();
    }
    running = false;
    writer.interrupt();
    try {
      writer.join(config.commandTimeout().toMillis() * 2 + 1000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    scheduler.shutdownNow();
    synchronized (connectLock) {
      if (readConn != null) {
        readConn.close();
      }
      if (writeConn != null) {
        writeConn.close();
      }
      readConn = null;
      writeConn = null;
    }
    if (client != null) {
      client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
    } else {
      clusterClient.shutdown(Duration.ZERO, Duration.ofSeconds(2));
    }
    resources.shutdown(0, 2, TimeUnit.SECONDS);
  }

  private void bindMeters(MeterRegistry r) {
    Gauge.builder("kvroute.kvindex.redis.queue.depth", queue, ArrayBlockingQueue::size)
        .description("write operations waiting for the writer thread")
        .register(r);
    Gauge.builder("kvroute.kvindex.redis.queue.capacity", queue, q -> config.writeQueueCapacity())
        .register(r);
    FunctionCounter.builder("kvroute.kvindex.redis.queue.dropped", queueDropped, LongAdder::sum)
        .description("write operations dropped because the queue was full")
        .register(r);
    FunctionCounter.builder("kvroute.kvindex.redis.write.batches", batches, LongAdder::sum)
        .register(r);
    FunctionCounter.builder("kvroute.kvindex.redis.write.ops", opsSent, LongAdder::sum).register(r);
    Gauge.builder("kvroute.kvindex.redis.available", this, c -> c.available() ? 1 : 0).register(r);
    for (String op : List.of("connect", "lookup", "write", "read", "lease", "fleet")) {
      FunctionCounter.builder(
              "kvroute.kvindex.redis.unavailable", health.counter(op), LongAdder::sum)
          .description("commands that failed because the server did not answer")
          .tag("op", op)
          .register(r);
    }
  }
}
