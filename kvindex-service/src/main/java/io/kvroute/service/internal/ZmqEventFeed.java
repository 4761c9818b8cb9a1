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
 * The ZMQ {@link EventFeed}: one {@link KvEventSubscriber} in connect mode (a SUB socket per pod,
 * replay through the pod's ROUTER when configured) applying events to the service's index, with
 * per-pod gap, replay and restart counts from its listener.
 *
 * <p>Thread-safe. Counters exist only for pods added (bounded by the configuration); listener
 * callbacks for other identities are ignored.
 */
final class ZmqEventFeed implements EventFeed, KvEventListener {
  private static final Logger log = LoggerFactory.getLogger(ZmqEventFeed.class);

  private final KvEventSubscriber subscriber;
  private final Map<String, Counts> counts = new ConcurrentHashMap<>();

  private static final class Counts {
    final LongAdder gaps = new LongAdder();
    final LongAdder replays = new LongAdder();
    final LongAdder restarts = new LongAdder();
  }

  ZmqEventFeed(BlockIndex index, String topic, MeterRegistry registry, LongSupplier nanoClock) {
    this.subscriber =
        KvEventSubscriber.builder()
            .sink(KvEventSink.of(index))
            .listener(this)
            .topic(topic)
            .meterRegistry(registry)
            .nanoClock(nanoClock)
            .build();
  }

  @Override
  public void start() {
    subscriber.start();
  }

  @Override
  public void addPod(PodSpec pod) {
    counts.putIfAbsent(pod.id(), new Counts());
    subscriber.addPod(new PodEndpoint(pod.id(), pod.events(), pod.replay().orElse(null), 1));
  }

  @Override
  public void removePod(String podId) {
    try {
      subscriber.removePod(podId).get(10, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (ExecutionException | TimeoutException e) {
      log.warn("unsubscribing pod {} did not complete: {}", podId, e.toString());
    }
    counts.remove(podId);
  }

  private long count(String podId, int which) {
    Counts c = counts.get(podId);
    if (c == null) {
      return 0;
    }
    return (which == 0 ? c.gaps : which == 1 ? c.replays : c.restarts).sum();
  }

  @Override
  public long gaps(String podId) {
    return count(podId, 0);
  }

  @Override
  public long replays(String podId) {
    return count(podId, 1);
  }

  @Override
  public long restarts(String podId) {
    return count(podId, 2);
  }

  @Override
  public void onGap(String pod, long expected, long received) {
    Counts c = counts.get(pod);
    if (c != null) {
      c.gaps.increment();
    }
  }

  @Override
  public void onReplay(String pod, long from, long to, int replayed, boolean complete) {
    Counts c = counts.get(pod);
    if (c != null) {
      c.replays.increment();
    }
  }

  @Override
  public void onRestart(String pod, long last, long received) {
    Counts c = counts.get(pod);
    if (c != null) {
      c.restarts.increment();
    }
  }

  @Override
  public void close() {
    subscriber.close();
  }
}
