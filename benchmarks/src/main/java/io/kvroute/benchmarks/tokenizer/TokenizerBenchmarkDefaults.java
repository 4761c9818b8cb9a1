package io.kvroute.benchmarks.tokenizer;

import io.kvroute.benchmarks.BenchmarkDefaults;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;

/**
 * The tokenizer benchmarks' settings on top of the suite's: sample time in microseconds, and a fork
 * whose DJL stays offline and untracked (the tokenizer files are local).
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(
    value = 1,
    jvmArgsAppend = {"-DOPT_OUT_TRACKING=true", "-Dai.djl.offline=true"})
public abstract class TokenizerBenchmarkDefaults extends BenchmarkDefaults {
  /** For subclasses. */
  protected TokenizerBenchmarkDefaults() {}
}
