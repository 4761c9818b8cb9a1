package io.kvroute.spring.gateway;

import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.zmq.KvEventListener;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

/**
 * When each pod's KV events last reached the index, and how many batches were dropped or resynced:
 * the index freshness the health indicator reports. Thread-safe; never throws.
 */
final class EventFreshness implements KvEventListener {
  private final LongSupplier nanoClock;
  private final Map<String, Long> lastBatch = new ConcurrentHashMap<>();
  private final AtomicLong batches = new AtomicLong();
  private final AtomicLong dropped = new AtomicLong();
  private final AtomicLong resyncs = new AtomicLong();

  EventFreshness(LongSupplier nanoClock) {
    this.nanoClock = nanoClock;
  }

  @Override
  public void onBatch(String pod, String topic, long seq, KvEventBatch batch, boolean replayed) {
    batches.incrementAndGet();
    lastBatch.put(pod, nanoClock.getAsLong());
  }

  @Override
  public void onDropped(String pod, long seq, String reason, Exception cause) {
    dropped.incrementAndGet();
  }

  @Override
  public void onResync(String pod, String reason) {
    resyncs.incrementAndGet();
  }

  /** Milliseconds since each pod's last applied batch (pods that sent none are absent). */
  Map<String, Long> ageMillisByPod() {
    long now = nanoClock.getAsLong();
    Map<String, Long> out = new java.util.TreeMap<>();
    lastBatch.forEach((pod, at) -> out.put(pod, Math.max(0, (now - at) / 1_000_000)));
    return out;
  }

  long batches() {
    return batches.get();
  }

  long dropped() {
    return dropped.get();
  }

  long resyncs() {
    return resyncs.get();
  }
}
