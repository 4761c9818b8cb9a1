package io.kvroute.scoring.internal;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.util.concurrent.TimeUnit;
import java.util.function.ToDoubleFunction;

/**
 * Micrometer bindings of the scheduler. Meter names (Prometheus renders dots as underscores and
 * adds {@code _seconds} / {@code _total}):
 *
 * <ul>
 *   <li>{@code kvroute.scheduler.duration} — timer of {@code pick}, tag {@code result}
 *   <li>{@code kvroute.scheduler.plugin.duration} — timer per plugin, tags {@code profile}, {@code
 *       plugin}, {@code kind} (filter, scorer, picker); one scheduling cycle in 8 is timed
 *   <li>{@code kvroute.scheduler.decisions} — counter, tag {@code result}
 *   <li>{@code kvroute.scheduler.pd.decisions} — counter, tag {@code outcome}
 *   <li>{@code kvroute.scheduler.tokenization.failures} — counter
 *   <li>gauges and function counters of every bounded map: {@code kvroute.scheduler.inflight.*},
 *       {@code kvroute.scheduler.approx.prefix.*}, {@code kvroute.scheduler.speculative.*}, {@code
 *       kvroute.scheduler.sessions.*}, {@code kvroute.scheduler.nohit.lru.size}, {@code
 *       kvroute.scheduler.metrics.*}
 * </ul>
 *
 * <p>Thread-safe. A {@code null} registry disables everything at no cost.
 */
public final class SchedulerMeters {
  private final MeterRegistry registry;

  /** Bindings to {@code registry} (nullable: disabled). */
  public SchedulerMeters(MeterRegistry registry) {
    this.registry = registry;
  }

  /** True when a registry is bound. */
  public boolean enabled() {
    return registry != null;
  }

  /** The cycle timer for a result, or null when disabled. */
  public Timer cycleTimer(String result) {
    return registry == null
        ? null
        : Timer.builder("kvroute.scheduler.duration")
            .description("Time to schedule one request")
            .tag("result", result)
            .register(registry);
  }

  /** The per-plugin timer, or null when disabled. */
  public Timer pluginTimer(String profile, String plugin, String kind) {
    return registry == null
        ? null
        : Timer.builder("kvroute.scheduler.plugin.duration")
            .description("Time spent in one scheduling plugin")
            .tags("profile", profile, "plugin", plugin, "kind", kind)
            .register(registry);
  }

  /** A counter with one tag, or null when disabled. */
  public Counter counter(String name, String tagKey, String tagValue) {
    return registry == null ? null : Counter.builder(name).tag(tagKey, tagValue).register(registry);
  }

  /** A counter without tags, or null when disabled. */
  public Counter counter(String name) {
    return registry == null ? null : Counter.builder(name).register(registry);
  }

  /** Registers a gauge over {@code obj}. */
  public <T> void gauge(String name, String description, T obj, ToDoubleFunction<T> f) {
    if (registry != null) {
      Gauge.builder(name, obj, f).description(description).register(registry);
    }
  }

  /** Registers a gauge with one tag. */
  public <T> void gauge(String name, String tagKey, String tagValue, T obj, ToDoubleFunction<T> f) {
    if (registry != null) {
      Gauge.builder(name, obj, f).tag(tagKey, tagValue).register(registry);
    }
  }

  /** Registers a function counter over {@code obj}. */
  public <T> void functionCounter(String name, String description, T obj, ToDoubleFunction<T> f) {
    if (registry != null) {
      FunctionCounter.builder(name, obj, f).description(description).register(registry);
    }
  }

  /** Records nanos on a nullable timer. */
  public static void record(Timer t, long nanos) {
    if (t != null) {
      t.record(nanos, TimeUnit.NANOSECONDS);
    }
  }

  /** Increments a nullable counter. */
  public static void increment(Counter c) {
    if (c != null) {
      c.increment();
    }
  }
}
