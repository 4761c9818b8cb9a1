package io.kvroute.envoy.internal;

import io.kvroute.router.RouteDecision;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The picker's meters. Names and tags are stable:
 *
 * <ul>
 *   <li>{@code kvroute.epp.streams} (gauge): ext_proc streams open;
 *   <li>{@code kvroute.epp.picks} (counter, {@code kind=routed|passthrough}): requests given a
 *       destination, by the router ({@code routed}) or without a body ({@code passthrough});
 *   <li>{@code kvroute.epp.pick.duration} (timer): from the end of the request body to the
 *       decision;
 *   <li>{@code kvroute.epp.rejections} (counter, {@code status}): immediate responses sent;
 *   <li>{@code kvroute.epp.completions} (counter, {@code outcome}): routed requests completed;
 *   <li>{@code kvroute.epp.usage.tokens} (counter, {@code kind=prompt|completion|cached}): usage
 *       read from responses;
 *   <li>{@code kvroute.epp.protocol.errors} (counter): messages out of sequence for the mode.
 * </ul>
 *
 * <p>Thread-safe. Tag sets are bounded: statuses are HTTP codes, outcomes an enum.
 */
public final class EppMetrics {
  private final MeterRegistry registry;
  private final AtomicInteger streams = new AtomicInteger();
  private final Counter routed;
  private final Counter passthrough;
  private final Timer pick;
  private final Map<RouteDecision.Outcome, Counter> completions =
      new EnumMap<>(RouteDecision.Outcome.class);
  private final Map<Integer, Counter> rejections = new ConcurrentHashMap<>();
  private final Counter promptTokens;
  private final Counter completionTokens;
  private final Counter cachedTokens;
  private final Counter protocolErrors;

  /** Registers the meters in {@code registry}. */
  public EppMetrics(MeterRegistry registry) {
    this.registry = registry;
    Gauge.builder("kvroute.epp.streams", streams, AtomicInteger::get)
        .description("ext_proc streams open")
        .register(registry);
    routed = Counter.builder("kvroute.epp.picks").tag("kind", "routed").register(registry);
    passthrough =
        Counter.builder("kvroute.epp.picks").tag("kind", "passthrough").register(registry);
    pick =
        Timer.builder("kvroute.epp.pick.duration")
            .description("from the end of the request body to the routing decision")
            .register(registry);
    for (RouteDecision.Outcome o : RouteDecision.Outcome.values()) {
      completions.put(
          o,
          Counter.builder("kvroute.epp.completions")
              .tag("outcome", o.name().toLowerCase(java.util.Locale.ROOT))
              .register(registry));
    }
    promptTokens =
        Counter.builder("kvroute.epp.usage.tokens").tag("kind", "prompt").register(registry);
    completionTokens =
        Counter.builder("kvroute.epp.usage.tokens").tag("kind", "completion").register(registry);
    cachedTokens =
        Counter.builder("kvroute.epp.usage.tokens").tag("kind", "cached").register(registry);
    protocolErrors = Counter.builder("kvroute.epp.protocol.errors").register(registry);
  }

  /** Streams open now. */
  public int activeStreams() {
    return streams.get();
  }

  void streamOpened() {
    streams.incrementAndGet();
  }

  void streamClosed() {
    streams.decrementAndGet();
  }

  void routed(long pickNanos) {
    routed.increment();
    pick.record(pickNanos, TimeUnit.NANOSECONDS);
  }

  void passthrough() {
    passthrough.increment();
  }

  void rejected(int status) {
    rejections
        .computeIfAbsent(
            status,
            s ->
                Counter.builder("kvroute.epp.rejections")
                    .tag("status", Integer.toString(s))
                    .register(registry))
        .increment();
  }

  void completed(RouteDecision.Outcome outcome) {
    completions.get(outcome).increment();
  }

  void usage(UsageScanner.Usage u) {
    if (u.promptTokens() >= 0) {
      promptTokens.increment(u.promptTokens());
    }
    if (u.completionTokens() >= 0) {
      completionTokens.increment(u.completionTokens());
    }
    if (u.cachedTokens() >= 0) {
      cachedTokens.increment(u.cachedTokens());
    }
  }

  void protocolError() {
    protocolErrors.increment();
  }
}
