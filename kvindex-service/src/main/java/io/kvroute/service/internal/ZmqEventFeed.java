package io.kvroute.service.internal;

import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.event.KvEventSink;
import io.kvroute.kvindex.zmq.KvEventListener;
import io.kvroute.kvindex.zmq.KvEventSubscriber;
import io.kvroute.kvindex.zmq.PodEndpoint;
import io.kvroute.service.ServiceConfig.PodSpec;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The KV events the service follows: one {@link KvEventSubscriber} in connect mode (a SUB socket
 * per pod, replay through the pod's ROUTER when configured) applying events to the service's index,
 * with per-pod gap, replay and restart counts from its listener. {@link #disabled()} follows
 * nothing (an index filled by other means). The embeddable, endpoint-keyed event feed is the
 * router's {@code KvEventFeed}; this is the service's own wiring, not an API.
 *
 * <p>Thread-safe. Counters exist only for pods added (bounded by the configuration); listener
 * callbacks for other identities are ignored. {@link #addPod} and {@link #removePod} may be called
 * at any time after {@link #start()}.
 */
public final class ZmqEventFeed implements KvEventListener, AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(ZmqEventFeed.class);

  private final KvEventSubscriber subscriber;
  private final Map<String, Counts> counts = new ConcurrentHashMap<>();

  private static final int GAPS = 0;
  private static final int REPLAYS = 1;
  private static final int RESTARTS = 2;

  /** A pod's counts, indexed by {@link #GAPS}, {@link #REPLAYS}, {@link #RESTARTS}. */
  private static final class Counts {
    final LongAdder[] byKind = {new LongAdder(), new LongAdder(), new LongAdder()};
  }

  private ZmqEventFeed(KvEventSubscriber.Builder subscriber) {
    this.subscriber = subscriber == null ? null : subscriber.listener(this).build();
  }

  /** A feed applying every added pod's events to {@code index}. */
  public static ZmqEventFeed of(
      BlockIndex index, String topic, MeterRegistry registry, LongSupplier nanoClock) {
    return new ZmqEventFeed(
        KvEventSubscriber.builder()
            .sink(KvEventSink.of(index))
            .topic(topic)
            .meterRegistry(registry)
            .nanoClock(nanoClock));
  }

  /** A feed that receives nothing. */
  public static ZmqEventFeed disabled() {
    return new ZmqEventFeed(null);
  }

  /** Starts receiving. */
  public void start() {
    if (subscriber != null) {
      subscriber.start();
    }
  }

  /** Subscribes to a pod's events. */
  public void addPod(PodSpec pod) {
    if (subscriber == null) {
      return;
    }
    counts.putIfAbsent(pod.id(), new Counts());
    subscriber.addPod(new PodEndpoint(pod.id(), pod.events(), pod.replay().orElse(null), 1));
  }

  /** Stops following a pod (its index entries are dropped by the caller). */
  public void removePod(String podId) {
    if (subscriber == null) {
      return;
    }
    try {
      subscriber.removePod(podId).get(10, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (ExecutionException | TimeoutException e) {
      log.warn("unsubscribing pod {} did not complete: {}", podId, e.toString());
    }
    counts.remove(podId);
  }

  private long count(String podId, int kind) {
    Counts c = counts.get(podId);
    return c == null ? 0 : c.byKind[kind].sum();
  }

  private void increment(String podId, int kind) {
    Counts c = counts.get(podId);
    if (c != null) {
      c.byKind[kind].increment();
    }
  }

  /** Sequence gaps seen for the pod so far. */
  public long gaps(String podId) {
    return count(podId, GAPS);
  }

  /** Replays requested for the pod so far. */
  public long replays(String podId) {
    return count(podId, REPLAYS);
  }

  /** Publisher restarts (sequence going backwards) seen for the pod so far. */
  public long restarts(String podId) {
    return count(podId, RESTARTS);
  }

  @Override
  public void onGap(String pod, long expected, long received) {
    increment(pod, GAPS);
  }

  @Override
  public void onReplay(String pod, long from, long to, int replayed, boolean complete) {
    increment(pod, REPLAYS);
  }

  @Override
  public void onRestart(String pod, long last, long received) {
    increment(pod, RESTARTS);
  }

  /** Stops receiving and releases sockets and threads. */
  @Override
  public void close() {
    if (subscriber != null) {
      subscriber.close();
    }
  }
}
