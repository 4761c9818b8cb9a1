package io.kvroute.testkit;

import io.kvroute.kvindex.event.EventSchema;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventCodec;
import io.kvroute.kvindex.zmq.KvEventPublisher;
import java.time.Clock;
import java.util.List;
import org.zeromq.ZMQException;

/**
 * Turns block-pool event lists into encoded {@code KVEventBatch}es, applies event faults and hands
 * them to kvindex's {@link KvEventPublisher} (vLLM framing, ROUTER replay). Called under the block
 * pool's lock, so mutation order is publish order.
 *
 * <p>Thread-safe.
 */
final class EventChannel implements AutoCloseable {

  private static final byte[] CORRUPT = {(byte) 0xc1, 0x00, (byte) 0xff, 0x13, 0x37};

  private final String topic;
  private final EventSchema schema;
  private final int replayBufferSteps;
  private final Clock clock;
  private final SimFaults faults;
  private final boolean replay;
  private KvEventPublisher publisher;
  private String endpoint;
  private String replayEndpoint;
  private long batches;
  // batches produced while the faults hold them back, sent in order on release
  private final java.util.ArrayDeque<byte[]> held = new java.util.ArrayDeque<>();

  EventChannel(VllmSimulator.Builder b, String topic, SimFaults faults) {
    this.topic = topic;
    this.schema = b.eventSchema;
    this.replayBufferSteps = b.replayBufferSteps;
    this.clock = b.clock;
    this.faults = faults;
    this.replay = b.replay;
    String ep = b.eventsEndpoint != null ? b.eventsEndpoint : "tcp://" + b.host + ":*";
    String rep =
        !b.replay ? null : b.replayEndpoint != null ? b.replayEndpoint : "tcp://" + b.host + ":*";
    this.publisher = open(ep, rep);
    this.endpoint = publisher.endpoint();
    this.replayEndpoint = publisher.replayEndpoint();
  }

  private KvEventPublisher open(String ep, String rep) {
    return KvEventPublisher.builder()
        .endpoint(ep)
        .replayEndpoint(rep)
        .topic(topic)
        .bufferSteps(replayBufferSteps)
        .bind(true)
        .build();
  }

  synchronized void accept(List<KvEvent> events) {
    if (publisher == null) {
      return;
    }
    double ts = clock.millis() / 1000.0;
    Integer rank = schema.batchFields() == 3 ? 0 : null;
    KvEventBatch batch =
        KvEventBatch.builder().ts(ts).events(events).dataParallelRank(rank).schema(schema).build();
    batches++;
    if (faults.eventBatchesHeld()) {
      held.add(KvEventCodec.encode(batch, schema));
      return;
    }
    releaseHeld(); // released but not yet sent: they go first
    switch (faults.onBatch()) {
      case 1:
        publisher.dropSequence(publisher.nextSequence());
        publisher.publishPayload(KvEventCodec.encode(batch, schema));
        return;
      case 2:
        publisher.publishPayload(CORRUPT.clone());
        return;
      default:
        publisher.publishPayload(KvEventCodec.encode(batch, schema));
    }
  }

  /** Sends the batches held back, in order. */
  synchronized void releaseHeld() {
    while (!held.isEmpty()) {
      byte[] payload = held.poll();
      if (publisher != null) {
        publisher.publishPayload(payload);
      }
    }
  }

  /** Closes and re-binds the same endpoints: sequence 0, empty replay buffer. */
  synchronized void restart() {
    if (publisher == null) {
      return;
    }
    publisher.close();
    publisher = null;
    RuntimeException last = null;
    for (int attempt = 0; attempt < 50; attempt++) {
      try {
        publisher = open(endpoint, replay ? replayEndpoint : null);
        return;
      } catch (ZMQException | IllegalStateException e) {
        last = e;
        Thread.onSpinWait();
        try {
          Thread.sleep(10);
        } catch (InterruptedException ie) {
          Thread.currentThread().interrupt();
          break;
        }
      }
    }
    throw new IllegalStateException("cannot re-bind event publisher on " + endpoint, last);
  }

  synchronized long batches() {
    return batches;
  }

  String endpoint() {
    return endpoint;
  }

  String replayEndpoint() {
    return replayEndpoint;
  }

  @Override
  public synchronized void close() {
    if (publisher != null) {
      publisher.close();
      publisher = null;
    }
  }
}
