package io.kvroute.router.flow;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Flow control's meters, per band and tenant: {@code kvroute.flow.queue.length} (gauge), {@code
 * kvroute.flow.wait} (timer of the wait before admission), {@code kvroute.flow.admitted}, {@code
 * kvroute.flow.dropped} (tag {@code reason}), {@code kvroute.flow.cancelled}; and {@code
 * kvroute.flow.queued} (all waiting requests). Tenants beyond {@code maxTenantTags} are tagged
 * {@code other}, so the tag's cardinality is bounded. Called under the controller's lock; a null
 * registry records nothing.
 */
final class FlowMeters {
  static final String OTHER = "other";

  private final MeterRegistry registry;
  private final FlowControlConfig config;
  private final Map<String, String> tenantTags = new HashMap<>();
  private final Map<String, PerKey> perKey = new HashMap<>();

  /** The meters of one band and tenant tag. */
  private static final class PerKey {
    final AtomicInteger length = new AtomicInteger();
    final Counter admitted;
    final Timer wait;
    final Map<RequestDroppedException.Reason, Counter> dropped = new HashMap<>();
    final Counter cancelled;

    PerKey(MeterRegistry r, String band, String tenant) {
      Gauge.builder("kvroute.flow.queue.length", length, AtomicInteger::get)
          .description("Requests waiting in flow control")
          .tags("band", band, "tenant", tenant)
          .register(r);
      this.admitted =
          Counter.builder("kvroute.flow.admitted")
              .description("Requests admitted by flow control")
              .tags("band", band, "tenant", tenant)
              .register(r);
      this.wait =
          Timer.builder("kvroute.flow.wait")
              .description("Time a request waited in flow control before its admission")
              .tags("band", band, "tenant", tenant)
              .register(r);
      this.cancelled =
          Counter.builder("kvroute.flow.cancelled")
              .description("Waiting requests whose client went away")
              .tags("band", band, "tenant", tenant)
              .register(r);
      for (RequestDroppedException.Reason reason : RequestDroppedException.Reason.values()) {
        dropped.put(
            reason,
            Counter.builder("kvroute.flow.dropped")
                .description("Requests dropped by flow control")
                .tags("band", band, "tenant", tenant, "reason", reason.header())
                .register(r));
      }
    }
  }

  FlowMeters(MeterRegistry registry, FlowControlConfig config, FlowController controller) {
    this.registry = registry;
    this.config = config;
    if (registry != null) {
      Gauge.builder("kvroute.flow.queued", controller, FlowController::queued)
          .description("Requests waiting in flow control, all bands")
          .register(registry);
    }
  }

  private PerKey of(FlowController.Admission a) {
    String band = config.bands().get(a.bandIndex()).name();
    String tenant = tenantTag(a.request().tenant());
    String key = band + '\u0000' + tenant;
    PerKey k = perKey.get(key);
    if (k == null) {
      k = new PerKey(registry, band, tenant);
      perKey.put(key, k);
    }
    return k;
  }

  private String tenantTag(String tenant) {
    String t = tenantTags.get(tenant);
    if (t != null) {
      return t;
    }
    t = tenantTags.size() < config.maxTenantTags() ? tenant : OTHER;
    if (!t.equals(OTHER)) {
      tenantTags.put(tenant, t);
    }
    return t;
  }

  void queued(FlowController.Admission a, int delta) {
    if (registry != null) {
      of(a).length.addAndGet(delta);
    }
  }

  void admitted(FlowController.Admission a, long waitedNanos) {
    if (registry != null) {
      PerKey k = of(a);
      k.admitted.increment();
      k.wait.record(Math.max(0, waitedNanos), TimeUnit.NANOSECONDS);
    }
  }

  void dropped(FlowController.Admission a, RequestDroppedException.Reason reason) {
    if (registry != null) {
      of(a).dropped.get(reason).increment();
    }
  }

  void cancelled(FlowController.Admission a) {
    if (registry != null) {
      of(a).cancelled.increment();
    }
  }
}
