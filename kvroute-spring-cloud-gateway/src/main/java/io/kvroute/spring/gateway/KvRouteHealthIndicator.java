package io.kvroute.spring.gateway;

import io.kvroute.connector.Endpoint;
import io.kvroute.router.KvRouter;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;

/**
 * kvroute's contribution to Spring Boot's health endpoint: {@code UP} when the router has an
 * endpoint that can decode (role {@code decode} or {@code both}), {@code DOWN} otherwise (every
 * request would fail). Details: the endpoints by role, requests in flight and, when precise prefix
 * scoring is on, the index's freshness (milliseconds since each pod's last KV-event batch, batches
 * applied, dropped and resynchronised) and the KV-cache parity check's verdict per model (a failed
 * parity leaves the gateway {@code UP}: the model is routed with approximate scoring, and the
 * detail says why). Reads memory only.
 */
public final class KvRouteHealthIndicator implements HealthIndicator {
  private final KvRouter router;
  private final EventFreshness freshness;

  /** An indicator for {@code router}, without index details. */
  public KvRouteHealthIndicator(KvRouter router) {
    this(router, null);
  }

  KvRouteHealthIndicator(KvRouter router, EventFreshness freshness) {
    this.router = Objects.requireNonNull(router, "router");
    this.freshness = freshness;
  }

  @Override
  public Health health() {
    Map<String, Integer> byRole = new TreeMap<>();
    boolean canDecode = false;
    for (Endpoint e : router.endpoints()) {
      byRole.merge(e.role().name().toLowerCase(Locale.ROOT), 1, Integer::sum);
      canDecode |= e.role() != Endpoint.Role.PREFILL;
    }
    Health.Builder h = canDecode ? Health.up() : Health.down();
    h.withDetail("endpoints", byRole).withDetail("inFlight", router.inFlight());
    if (!canDecode) {
      h.withDetail("reason", "no endpoint can decode: every request would fail");
    }
    router
        .parity()
        .ifPresent(
            p -> {
              Map<String, Object> models = new TreeMap<>();
              for (io.kvroute.router.ParityStatus s : p.models()) {
                models.put(s.model(), s.describe());
              }
              h.withDetail(
                  "parity",
                  Map.of(
                      "expected", p.expected().describe(),
                      "failing", p.failing(),
                      "models", models));
            });
    if (freshness != null) {
      h.withDetail(
          "index",
          Map.of(
              "lastEventAgeMillis", freshness.ageMillisByPod(),
              "batches", freshness.batches(),
              "dropped", freshness.dropped(),
              "resyncs", freshness.resyncs()));
    }
    return h.build();
  }
}
