package io.kvroute.benchmarks;

import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The settings of the suite's latency benchmarks (one operation takes microseconds): sample time in
 * microseconds, 2 warm-up and 3 measured iterations of 2 s, one fork, one state per benchmark. JMH
 * reads these annotations from the superclass (its sample {@code JMHSample_24_Inheritance}); a
 * subclass overrides any of them by declaring its own (the tokenizer benchmarks' {@code @Fork}).
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 3, time = 2)
@Fork(1)
public abstract class SampledMicroseconds {
  /** For subclasses. */
  protected SampledMicroseconds() {}
}
