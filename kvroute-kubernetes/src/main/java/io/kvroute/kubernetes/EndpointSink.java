package io.kvroute.kubernetes;

import io.kvroute.connector.Endpoint;
import io.kvroute.router.KvEventFeed;
import io.kvroute.router.KvRouter;
import java.util.Objects;

/**
 * Where {@link KubernetesDiscovery} applies the endpoints it finds: a {@link KvRouter} ({@link
 * #of(KvRouter)}) or anything else that keeps a set of endpoints.
 *
 * <p>The discovery calls one sink from one thread at a time, in order; an implementation need not
 * be thread-safe against those calls, but should return quickly (it runs on the discovery's only
 * thread).
 */
public interface EndpointSink {

  /**
   * Adds an endpoint, or replaces the one with its id.
   *
   * @param endpoint the endpoint
   * @param events where it publishes KV events, or null for none
   * @throws IllegalArgumentException when the sink rejects the endpoint (the discovery logs it and
   *     tries again on its next resync)
   */
  void add(Endpoint endpoint, KvEventFeed.Source events);

  /** Removes the endpoint with this id; nothing happens when there is none. */
  void remove(String endpointId);

  /**
   * A sink applying changes to a router: {@link KvRouter#addEndpoint(Endpoint, KvEventFeed.Source)}
   * and {@link KvRouter#removeEndpoint(String)}.
   */
  static EndpointSink of(KvRouter router) {
    Objects.requireNonNull(router, "router");
    return new EndpointSink() {
      @Override
      public void add(Endpoint endpoint, KvEventFeed.Source events) {
        router.addEndpoint(endpoint, events);
      }

      @Override
      public void remove(String endpointId) {
        router.removeEndpoint(endpointId);
      }

      @Override
      public String toString() {
        return "EndpointSink.of(KvRouter)";
      }
    };
  }
}
