package io.kvroute.benchmarks;

import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The suite's defaults: one state per benchmark, 2 warm-up and 3 measured iterations of 2 s, one
 * fork. A benchmark extends this and declares its mode and unit; JMH reads these annotations from
 * the superclass (its sample {@code JMHSample_24_Inheritance}), and a benchmark overrides any of
 * them by declaring its own (the Redis benchmarks' iterations, the tokenizer benchmarks' fork).
 */
@State(Scope.Benchmark)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 3, time = 2)
@Fork(1)
public abstract class BenchmarkDefaults {
  /** For subclasses. */
  protected BenchmarkDefaults() {}
}
