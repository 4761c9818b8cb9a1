package io.kvroute.router;

import io.kvroute.connector.Endpoint;
import java.util.Objects;

/**
 * Subscribes to the KV-cache events of endpoints as they come and go, feeding the index the
 * scheduler's precise prefix scorer reads. {@link KvEventFeeds#zmq} is the JeroMQ implementation.
 *
 * <p>Implementations are thread-safe; {@link #add} and {@link #remove} return quickly (connecting
 * happens in the background).
 */
public interface KvEventFeed extends AutoCloseable {

  /**
   * Where an endpoint publishes its KV events.
   *
   * @param publisher the ZMQ PUB endpoint, e.g. {@code tcp://10.0.0.7:5557}
   * @param replay the ZMQ ROUTER replay endpoint, or null when the pod has none
   * @param topic the topic to subscribe to; empty for all
   */
  record Source(String publisher, String replay, String topic) {
    /** Validates. */
    public Source {
      Objects.requireNonNull(publisher, "publisher");
      topic = topic == null ? "" : topic;
    }
  }

  /**
   * Checks that {@link #add} would accept {@code source} for {@code endpoint}, without subscribing.
   * {@link KvRouter#addEndpoint(Endpoint, Source)} calls it before changing anything, so that a
   * rejected change changes nothing.
   *
   * @throws IllegalArgumentException naming the problem (e.g. a publisher that is not a ZMQ
   *     endpoint)
   */
  default void check(Endpoint endpoint, Source source) {}

  /**
   * Starts following {@code endpoint}'s events (its id keys the index entries). Following an id
   * that was just {@link #remove removed} waits for the removal to finish first.
   */
  void add(Endpoint endpoint, Source source);

  /** Stops following an endpoint and drops what the index knows of it. */
  void remove(String endpointId);

  /** Stops every subscription. */
  @Override
  void close();
}
