package io.kvroute.kvindex.zmq.internal;

import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.zmq.KvEventListener;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the subscriber tells the outside: the {@code kvroute_kvindex_*} Micrometer meters, the
 * {@link KvEventListener}, and logs (each problem kind once per pod at WARN, then only counted;
 * never with payload contents).
 *
 * <p>Thread-safe: counters are Micrometer's; the set of logged kinds is concurrent; listener calls
 * are made from whichever thread reports, and a listener that throws is logged and ignored.
 */
public final class Telemetry {
  private static final Logger LOG =
      LoggerFactory.getLogger("io.kvroute.kvindex.zmq.KvEventSubscriber");

  /** The listener (never {@code null}). */
  public final KvEventListener listener;

  /** The registry the meters are in. */
  public final MeterRegistry registry;

  private final Counter stored;
  private final Counter removed;
  private final Counter cleared;
  private final Counter batches;
  private final Counter decodeErrors;
  private final Counter unknownTags;
  private final Counter gaps;
  private final Counter duplicates;
  private final Counter replaysComplete;
  private final Counter replaysIncomplete;
  private final Counter replaysRejected;
  private final Counter restarts;
  private final Counter catchUps;
  private final Counter reopens;
  private final Map<String, Counter> resyncs = new ConcurrentHashMap<>();
  private final Map<String, Counter> dropped = new ConcurrentHashMap<>();
  private final Map<String, Counter> attemptsFailed = new ConcurrentHashMap<>();
  private final Map<String, Counter> stalls = new ConcurrentHashMap<>();
  private final Set<String> warned = ConcurrentHashMap.newKeySet();
  private final List<Gauge> gauges = new ArrayList<>();

  /** Live batches held back behind running replays, over all publishers. */
  public final AtomicInteger heldBack = new AtomicInteger();

  /** Registers the meters. */
  public Telemetry(MeterRegistry r, KvEventListener listener) {
    this.registry = r;
    this.listener = listener;
    stored = Counter.builder("kvroute.kvindex.events").tag("type", "BlockStored").register(r);
    removed = Counter.builder("kvroute.kvindex.events").tag("type", "BlockRemoved").register(r);
    cleared = Counter.builder("kvroute.kvindex.events").tag("type", "AllBlocksCleared").register(r);
    batches = r.counter("kvroute.kvindex.batches");
    decodeErrors = r.counter("kvroute.kvindex.decode.errors");
    unknownTags = r.counter("kvroute.kvindex.unknown.tags");
    gaps = r.counter("kvroute.kvindex.gaps");
    duplicates = r.counter("kvroute.kvindex.duplicates");
    replaysComplete = r.counter("kvroute.kvindex.replays", "outcome", "complete");
    replaysIncomplete = r.counter("kvroute.kvindex.replays", "outcome", "incomplete");
    replaysRejected = r.counter("kvroute.kvindex.replays", "outcome", "rejected");
    restarts = r.counter("kvroute.kvindex.restarts");
    catchUps = r.counter("kvroute.kvindex.catchups");
    reopens = r.counter("kvroute.kvindex.socket.reopens");
    gauge(
        "kvroute.kvindex.replay.buffered",
        heldBack::get,
        "live KV event messages held back while their pod's replay runs");
  }

  /** Registers a gauge that {@link #close()} removes. */
  public void gauge(String name, Supplier<Number> value, String description, String... tags) {
    gauges.add(Gauge.builder(name, value).tags(tags).description(description).register(registry));
  }

  /** Removes the gauges (counters stay, as Micrometer counters do). */
  public void close() {
    for (Gauge g : gauges) {
      registry.remove(g);
    }
    gauges.clear();
  }

  // ------------------------------------------------------------------ counts

  /** One applied batch and its events. */
  public void batch(List<KvEvent> events, int unknown) {
    batches.increment();
    for (KvEvent e : events) {
      (e instanceof KvEvent.BlockStored
              ? stored
              : e instanceof KvEvent.BlockRemoved ? removed : cleared)
          .increment();
    }
    if (unknown > 0) {
      unknownTags.increment(unknown);
    }
  }

  /** A payload that did not decode. */
  public void decodeError() {
    decodeErrors.increment();
    dropped("malformed");
  }

  /** {@code kvroute_kvindex_dropped{reason}}. */
  public void dropped(String reason) {
    dropped
        .computeIfAbsent(reason, k -> registry.counter("kvroute.kvindex.dropped", "reason", k))
        .increment();
  }

  /** {@code kvroute_kvindex_resyncs{reason}}. */
  public void resync(String reason) {
    resyncs
        .computeIfAbsent(reason, k -> registry.counter("kvroute.kvindex.resyncs", "reason", k))
        .increment();
  }

  /**
   * {@code kvroute_kvindex_replay_attempts_failed{reason=idle|timeout|disconnected|error}}: a
   * replay attempt ended without the end marker (it is retried, up to 3 attempts).
   */
  public void replayAttemptFailed(String reason) {
    attemptsFailed
        .computeIfAbsent(
            reason, k -> registry.counter("kvroute.kvindex.replay.attempts.failed", "reason", k))
        .increment();
  }

  /**
   * {@code kvroute_kvindex_handshake_stalls{socket=sub|replay}}: a connection whose ZMTP handshake
   * did not complete soon after its TCP connect was abandoned for a fresh one.
   */
  public void handshakeStall(String socket) {
    stalls
        .computeIfAbsent(
            socket, k -> registry.counter("kvroute.kvindex.handshake.stalls", "socket", k))
        .increment();
  }

  /** {@code kvroute_kvindex_gaps}. */
  public void gap() {
    gaps.increment();
  }

  /** {@code kvroute_kvindex_duplicates}. */
  public void duplicate() {
    duplicates.increment();
  }

  /** {@code kvroute_kvindex_restarts}. */
  public void restart() {
    restarts.increment();
  }

  /** {@code kvroute_kvindex_socket_reopens}. */
  public void reopen() {
    reopens.increment();
  }

  /** {@code kvroute_kvindex_replays{outcome=rejected}}. */
  public void replayRejected() {
    replaysRejected.increment();
  }

  /** A replay ended: a catch-up (first contact, verification) or a repair. */
  public void replayEnded(boolean catchUp, boolean complete) {
    if (catchUp) {
      catchUps.increment();
    } else {
      (complete ? replaysComplete : replaysIncomplete).increment();
    }
  }

  // ------------------------------------------------------------------ logs

  /** Logs {@code kind} for {@code pod} once at WARN; later occurrences are only counted. */
  public void warnOnce(String pod, String kind, String detail) {
    if (warned.add(pod + '\0' + kind)) {
      LOG.warn(
          "KV events from pod {}: {} ({}); further occurrences are only counted in kvroute_kvindex_* metrics",
          pod,
          kind,
          detail);
    }
  }

  /** Logs {@code kind} for {@code pod} once at INFO (expected events, e.g. joining late). */
  public void infoOnce(String pod, String kind, String detail) {
    if (warned.add(pod + '\0' + kind)) {
      LOG.info("KV events from pod {}: {} ({})", pod, kind, detail);
    }
  }

  /** Logs once per subscriber at WARN. */
  public void warnOncePerSubscriber(String key, String message, Object arg) {
    if (warned.add('\0' + key)) {
      LOG.warn(message, arg);
    }
  }

  /** Forgets what was logged for {@code pod} (it was removed; a new pod of that id logs again). */
  public void forget(String pod) {
    warned.removeIf(k -> k.startsWith(pod + '\0'));
  }

  /** Logs at WARN with the exception. */
  public void warn(String message, Object arg, Throwable t) {
    LOG.warn(message, arg, t);
  }

  /** Logs at ERROR with the exception. */
  public void error(String message, Throwable t) {
    LOG.error(message, t);
  }

  /** Whether {@link #debug} logs (the subscriber's logger at DEBUG). */
  public boolean debugging() {
    return LOG.isDebugEnabled();
  }

  /**
   * Logs one step of a stream's life at DEBUG (replay requests and answers, handshakes, sequencing
   * decisions); never payload contents.
   */
  public void debug(String pod, String what) {
    if (LOG.isDebugEnabled()) {
      LOG.debug("KV events from pod {}: {}", pod, what);
    }
  }

  /** Calls the listener; what it throws is logged and ignored. */
  public void listen(Runnable call) {
    try {
      call.run();
    } catch (RuntimeException e) {
      LOG.warn("KvEventListener threw; ignored", e);
    }
  }
}
