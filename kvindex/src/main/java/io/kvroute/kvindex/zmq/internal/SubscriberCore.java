package io.kvroute.kvindex.zmq.internal;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * The parts of a {@code KvEventSubscriber} put together: telemetry, the JeroMQ context, the shards,
 * the replay client and the socket loop; what the public class does, it does here.
 *
 * <p>Thread-safe.
 */
public final class SubscriberCore {
  private final SubscriberConfig config;
  private final Telemetry telemetry;
  private final ZContext context;
  private final boolean ownsContext;
  private final Shard[] shards;
  private final ReplayClient replays;
  private final SocketLoop io;

  /** Builds the parts; nothing runs until {@link #start()}. */
  public SubscriberCore(SubscriberConfig config) {
    this.config = config;
    this.telemetry = new Telemetry(config.meterRegistry(), config.listener());
    this.ownsContext = config.context() == null;
    this.context = ownsContext ? new ZContext(1) : config.context();
    if (ownsContext) {
      // one SUB per publisher, the replay DEALERs, and sockets closed but not yet reaped (a reopen)
      context.getContext().setMaxSockets(Math.max(1024, 2 * config.maxPods() + 256));
    }
    this.shards = new Shard[config.shards()];
    for (int i = 0; i < shards.length; i++) {
      shards[i] = new Shard(i, config, telemetry);
    }
    this.replays = new ReplayClient(config, context, telemetry);
    this.io = new SocketLoop(config, context, telemetry, shards, replays);
  }

  /** Starts the threads. */
  public void start() {
    for (Shard s : shards) {
      s.start();
    }
    io.start();
  }

  /** Waits until the I/O thread is up (bound, in bind mode). */
  public void awaitBound() {
    try {
      io.bound().join();
    } catch (RuntimeException e) {
      throw new IllegalStateException(
          "cannot bind " + config.bindEndpoint() + ": " + e.getMessage(), e);
    }
  }

  /** The bound endpoint, once bound. */
  public Optional<String> boundEndpoint() {
    CompletableFuture<String> b = io.bound();
    return b.isDone() && !b.isCompletedExceptionally()
        ? Optional.ofNullable(b.join())
        : Optional.empty();
  }

  /**
   * Adds a connect-mode pod: one stream per rank, each {@code {identity, endpoint,
   * replayEndpoint-or-null}}.
   */
  public CompletableFuture<Void> addPod(String podId, List<String[]> ranks) {
    Map<String, List<Stream>> pods = io.pods();
    if (pods.size() >= config.maxPods()) {
      throw new IllegalStateException(
          "subscriber already has maxPods=" + config.maxPods() + " pods");
    }
    List<Stream> streams = new ArrayList<>();
    for (String[] r : ranks) {
      streams.add(io.newStream(podId, r[0], r[1], r[2]));
    }
    if (pods.putIfAbsent(podId, streams) != null) {
      throw new IllegalArgumentException("pod " + podId + " is already subscribed");
    }
    CompletableFuture<Void> done = new CompletableFuture<>();
    io.command(
        () -> {
          io.open(streams);
          done.complete(null);
        },
        done);
    return done;
  }

  /** Removes a pod; completes once the sink has been told, after the batches already applied. */
  public CompletableFuture<Void> removePod(String podId) {
    CompletableFuture<Void> done = new CompletableFuture<>();
    io.command(
        () -> {
          List<Stream> streams = io.close(podId);
          if (streams.isEmpty()) {
            done.complete(null);
            return;
          }
          AtomicInteger remaining = new AtomicInteger(streams.size());
          for (Stream s : streams) {
            s.shard.post(
                () -> {
                  s.discard();
                  for (String id : s.identities) {
                    config.sink().removePod(id);
                  }
                  telemetry.forget(s.label);
                  if (remaining.decrementAndGet() == 0) {
                    done.complete(null);
                  }
                });
          }
        },
        done);
    return done;
  }

  /** Connect-mode pod ids. */
  public Set<String> pods() {
    return Set.copyOf(io.pods().keySet());
  }

  /** Stops the threads, closes the sockets and (if owned) the context. */
  public void close(boolean started) {
    io.stop();
    for (Shard s : shards) {
      s.stop();
    }
    if (started) {
      try {
        io.join(TimeUnit.SECONDS.toMillis(60));
        for (Shard s : shards) {
          s.join(TimeUnit.SECONDS.toMillis(60));
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    // replay jobs stop within one receive slice; their DEALERs close before the context does
    replays.close();
    for (Shard s : shards) {
      s.drainAfterStop();
    }
    io.closeAfterStop();
    telemetry.close();
    if (ownsContext) {
      context.close();
    }
  }

  // ------------------------------------------------------------------ test hooks

  /** The max message size of every SUB socket, read on the I/O thread. */
  public CompletableFuture<List<Long>> maxMsgSizes() {
    CompletableFuture<List<Long>> done = new CompletableFuture<>();
    io.command(() -> done.complete(io.maxMsgSizes()), done);
    return done;
  }

  /** A replay DEALER configured as replays configure theirs. */
  public ZMQ.Socket newReplayDealer() {
    return replays.newDealer(new ReplayClient.DealerEvents());
  }

  /** Whether the connect-mode streams have nothing queued, replaying or held back. */
  public CompletableFuture<Boolean> quiescent() {
    List<CompletableFuture<Boolean>> checks = new ArrayList<>();
    for (List<Stream> streams : io.pods().values()) {
      for (Stream s : streams) {
        CompletableFuture<Boolean> f = new CompletableFuture<>();
        s.shard.post(() -> f.complete(!s.sequencer.recovering() && s.sequencer.held() == 0));
        checks.add(f);
      }
    }
    return CompletableFuture.allOf(checks.toArray(new CompletableFuture<?>[0]))
        .thenApply(
            v -> {
              for (CompletableFuture<Boolean> f : checks) {
                if (!f.join()) {
                  return false;
                }
              }
              for (Shard s : shards) {
                if (!s.idle()) {
                  return false;
                }
              }
              return true;
            });
  }

  /** Every connect-mode stream's sequencing state. */
  public CompletableFuture<String> describe() {
    List<CompletableFuture<String>> parts = new ArrayList<>();
    for (List<Stream> streams : io.pods().values()) {
      for (Stream s : streams) {
        CompletableFuture<String> f = new CompletableFuture<>();
        s.shard.post(() -> f.complete(s.toString()));
        parts.add(f);
      }
    }
    return CompletableFuture.allOf(parts.toArray(new CompletableFuture<?>[0]))
        .thenApply(v -> String.join("\n", parts.stream().map(CompletableFuture::join).toList()));
  }
}
