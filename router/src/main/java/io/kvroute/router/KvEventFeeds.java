package io.kvroute.router;

import io.kvroute.connector.Endpoint;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.event.KvEventSink;
import io.kvroute.kvindex.zmq.KvEventSubscriber;
import io.kvroute.kvindex.zmq.PodEndpoint;
import java.util.Objects;

/** Ready-made {@link KvEventFeed}s. */
public final class KvEventFeeds {
  private KvEventFeeds() {}

  /**
   * A feed that subscribes to each endpoint's vLLM/SGLang ZMQ publisher (SUB, with replay through
   * the endpoint's ROUTER when it has one) and applies the events to {@code index}, keyed by the
   * endpoint id. The subscriber is started here and closed with the feed.
   *
   * @param subscriber a configured, not yet started subscriber; its sink must write to {@code
   *     index} (see {@link #subscriberFor(BlockIndex)})
   */
  public static KvEventFeed zmq(KvEventSubscriber subscriber, BlockIndex index) {
    Objects.requireNonNull(subscriber, "subscriber");
    Objects.requireNonNull(index, "index");
    subscriber.start();
    java.util.Map<String, java.util.concurrent.CompletableFuture<Void>> removing =
        new java.util.concurrent.ConcurrentHashMap<>();
    return new KvEventFeed() {
      @Override
      public void check(Endpoint endpoint, Source source) {
        pod(endpoint, source);
      }

      private PodEndpoint pod(Endpoint endpoint, Source source) {
        PodEndpoint pod = PodEndpoint.of(endpoint.id(), source.publisher());
        return source.replay() != null ? pod.withReplay(source.replay()) : pod;
      }

      @Override
      public void add(Endpoint endpoint, Source source) {
        PodEndpoint pod = pod(endpoint, source);
        java.util.concurrent.CompletableFuture<Void> before = removing.remove(endpoint.id());
        if (before != null) {
          try {
            // the subscriber removes asynchronously: re-adding the id must come after it
            before.get(30, java.util.concurrent.TimeUnit.SECONDS);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while " + endpoint.id() + " was removed");
          } catch (java.util.concurrent.ExecutionException
              | java.util.concurrent.TimeoutException e) {
            // removed or not, the subscriber says so below if the id is still taken
          }
        }
        subscriber.addPod(pod);
      }

      @Override
      public void remove(String endpointId) {
        removing.put(
            endpointId,
            subscriber.removePod(endpointId).whenComplete((v, t) -> index.removePod(endpointId)));
      }

      @Override
      public void close() {
        subscriber.close();
      }
    };
  }

  /** A subscriber builder whose sink writes to {@code index}: configure it, then pass it in. */
  public static KvEventSubscriber.Builder subscriberFor(BlockIndex index) {
    return KvEventSubscriber.builder().sink(KvEventSink.of(index));
  }
}
