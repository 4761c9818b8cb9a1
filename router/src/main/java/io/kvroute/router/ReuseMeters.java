package io.kvroute.router;

import io.kvroute.scoring.ReuseSplit;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.EnumMap;
import java.util.Map;

/**
 * The reuse split of routed requests ({@code kvroute.routing.reuse.*}): for each request {@link
 * KvRouter#route} completed whose computing engine reported {@code cached_tokens}, the prompt
 * tokens, the tokens available on some eligible endpoint, captured on the chosen one and delivered
 * by the engine (all from one {@link ReuseSplit}), and each miss by cause. Requests without the
 * engine's report are counted apart ({@code measured=false}), so the token counters stay comparable
 * with each other. Thread-safe.
 */
final class ReuseMeters {
  private final Counter prompt;
  private final Counter available;
  private final Counter captured;
  private final Counter delivered;
  private final Counter measured;
  private final Counter unmeasured;
  private final Map<ReuseSplit.Miss, Counter> misses = new EnumMap<>(ReuseSplit.Miss.class);

  ReuseMeters(MeterRegistry registry) {
    this.prompt = tokens(registry, "prompt");
    this.available = tokens(registry, "available");
    this.captured = tokens(registry, "captured");
    this.delivered = tokens(registry, "delivered");
    this.measured = requests(registry, "true");
    this.unmeasured = requests(registry, "false");
    for (ReuseSplit.Miss m : ReuseSplit.Miss.values()) {
      misses.put(
          m,
          Counter.builder("kvroute.routing.reuse.misses")
              .description(
                  "Measured requests that reused less than they could, by cause (load, stale_index,"
                      + " none_available)")
              .tag("cause", m.tag())
              .register(registry));
    }
  }

  private static Counter tokens(MeterRegistry registry, String split) {
    return Counter.builder("kvroute.routing.reuse.tokens")
        .description(
            "Prompt tokens of measured requests: all (prompt), held by some eligible endpoint"
                + " (available), by the chosen one (captured), reused by the engine (delivered)")
        .baseUnit("tokens")
        .tag("split", split)
        .register(registry);
  }

  private static Counter requests(MeterRegistry registry, String measured) {
    return Counter.builder("kvroute.routing.reuse.requests")
        .description("Completed routed requests, by whether the engine reported its cached tokens")
        .tag("measured", measured)
        .register(registry);
  }

  /** Records one completed request's split (measured or not). */
  void record(ReuseSplit split) {
    if (!split.measured()) {
      unmeasured.increment();
      return;
    }
    measured.increment();
    prompt.increment(split.promptTokens());
    available.increment(split.available());
    captured.increment(split.captured());
    delivered.increment(split.delivered());
    for (ReuseSplit.Miss m : split.misses()) {
      misses.get(m).increment();
    }
  }
}
