package io.kvroute.router;

import io.kvroute.connector.Endpoint;
import io.kvroute.scoring.MetricsScraper;
import io.kvroute.scoring.Scheduler;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Predicate;

/**
 * The endpoints a router knows, keyed by id, and what follows them: KV-event subscriptions, the
 * metrics scraper's list, and, on removal, the scheduler's and the orchestrators' per-endpoint
 * state.
 *
 * <p>Thread-safe; changes to one endpoint id made concurrently are not ordered with each other.
 */
final class EndpointRegistry {
  private final Map<String, Endpoint> endpoints = new ConcurrentHashMap<>();
  private final KvEventFeed eventFeed;
  private final MetricsScraper scraper;
  private final Scheduler scheduler;
  private final Pipelines pipelines;

  /**
   * @param eventFeed null when the router subscribes to no KV events
   * @param scraper null when the router scrapes no metrics
   */
  EndpointRegistry(
      KvEventFeed eventFeed, MetricsScraper scraper, Scheduler scheduler, Pipelines pipelines) {
    this.eventFeed = eventFeed;
    this.scraper = scraper;
    this.scheduler = scheduler;
    this.pipelines = pipelines;
  }

  /** See {@link KvRouter#addEndpoint(Endpoint, KvEventFeed.Source)}. */
  void add(Endpoint endpoint, KvEventFeed.Source events) {
    Objects.requireNonNull(endpoint, "endpoint");
    if (eventFeed != null && events != null) {
      eventFeed.check(endpoint, events); // a rejected change changes nothing
    }
    Endpoint previous = endpoints.put(endpoint.id(), endpoint);
    if (eventFeed != null) {
      if (previous != null) {
        eventFeed.remove(endpoint.id());
      }
      if (events != null) {
        eventFeed.add(endpoint, events);
      }
    }
    scrapeAll();
  }

  /** See {@link KvRouter#removeEndpoint}. */
  boolean remove(String endpointId) {
    Endpoint removed = endpoints.remove(endpointId);
    if (removed == null) {
      return false;
    }
    if (eventFeed != null) {
      eventFeed.remove(endpointId);
    }
    scheduler.removeEndpoint(endpointId);
    pipelines.removeEndpoint(endpointId);
    scrapeAll();
    return true;
  }

  private void scrapeAll() {
    if (scraper != null) {
      scraper.setEndpoints(endpoints.values());
    }
  }

  /** The endpoints known now. */
  List<Endpoint> all() {
    return List.copyOf(endpoints.values());
  }

  /** How many endpoints are known now. */
  int size() {
    return endpoints.size();
  }

  /**
   * The endpoints that serve {@code model} (those labelled with it, and those without a model
   * label) and that {@code filter} accepts.
   */
  List<Endpoint> candidates(String model, Predicate<Endpoint> filter) {
    List<Endpoint> out = new ArrayList<>();
    for (Endpoint e : endpoints.values()) {
      String m = e.label(KvRouter.MODEL_LABEL);
      if ((m == null || m.equals(model)) && filter.test(e)) {
        out.add(e);
      }
    }
    return out;
  }
}
