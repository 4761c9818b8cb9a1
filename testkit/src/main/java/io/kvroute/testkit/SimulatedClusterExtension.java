package io.kvroute.testkit;

import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import java.util.Objects;
import java.util.function.Supplier;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;

/**
 * A JUnit 5 extension that starts one {@link SimulatedCluster} per test class (before all tests)
 * and closes it after all tests; test methods and constructors can take the cluster as a parameter.
 *
 * <p>Programmatic (full control):
 *
 * <pre>{@code
 * @RegisterExtension
 * static final SimulatedClusterExtension SIM = SimulatedClusterExtension.of(
 *     () -> SimulatedCluster.builder().prefill(1).decode(1).protocol(KvTransferProtocol.NIXL)
 *         .configure(b -> b.latency(LatencyModel.ZERO)).build());
 * // SIM.cluster() inside tests
 * }</pre>
 *
 * <p>Declarative: {@code @ExtendWith(SimulatedClusterExtension.class)} with an optional {@link
 * Config} annotation on the class (zero latency).
 *
 * <p>Thread-safe for JUnit's use: the cluster is created in {@code beforeAll} and published before
 * any test runs.
 */
public final class SimulatedClusterExtension
    implements BeforeAllCallback, AfterAllCallback, ParameterResolver {

  /** Declarative cluster shape for {@code @ExtendWith(SimulatedClusterExtension.class)}. */
  @Retention(RetentionPolicy.RUNTIME)
  @Target(ElementType.TYPE)
  @Inherited
  public @interface Config {
    /** Prefill pods. */
    int prefill() default 0;

    /** Decode pods. */
    int decode() default 0;

    /** Aggregated pods (default 1 when nothing else is set). */
    int both() default 0;

    /** KV-transfer protocol. */
    KvTransferProtocol protocol() default KvTransferProtocol.NONE;

    /** Tokens per block. */
    int blockSize() default 16;

    /** GPU blocks per pod. */
    int gpuBlocks() default 2048;

    /** Served model. */
    String model() default "sim-model";
  }

  private final Supplier<SimulatedCluster> factory;
  private volatile SimulatedCluster cluster;

  /** For {@code @ExtendWith}: the cluster comes from {@link Config} (or one BOTH pod). */
  public SimulatedClusterExtension() {
    this.factory = null;
  }

  private SimulatedClusterExtension(Supplier<SimulatedCluster> factory) {
    this.factory = factory;
  }

  /** An extension starting the cluster {@code factory} builds (not yet started). */
  public static SimulatedClusterExtension of(Supplier<SimulatedCluster> factory) {
    return new SimulatedClusterExtension(Objects.requireNonNull(factory, "factory"));
  }

  /**
   * The running cluster.
   *
   * @throws IllegalStateException outside the test class's lifetime
   */
  public SimulatedCluster cluster() {
    SimulatedCluster c = cluster;
    if (c == null) {
      throw new IllegalStateException(
          "the simulated cluster is not running (outside beforeAll..afterAll)");
    }
    return c;
  }

  @Override
  public void beforeAll(ExtensionContext context) {
    SimulatedCluster c;
    if (factory != null) {
      c = factory.get();
    } else {
      Config cfg = context.getRequiredTestClass().getAnnotation(Config.class);
      SimulatedCluster.Builder b = SimulatedCluster.builder();
      if (cfg == null) {
        b.both(1);
        b.configure(s -> s.latency(LatencyModel.ZERO));
      } else {
        int both = cfg.prefill() + cfg.decode() + cfg.both() == 0 ? 1 : cfg.both();
        b.prefill(cfg.prefill())
            .decode(cfg.decode())
            .both(both)
            .protocol(cfg.protocol())
            .model(cfg.model())
            .configure(
                s ->
                    s.latency(LatencyModel.ZERO)
                        .blockSize(cfg.blockSize())
                        .gpuBlocks(cfg.gpuBlocks()));
      }
      c = b.build();
    }
    cluster = c.start();
  }

  @Override
  public void afterAll(ExtensionContext context) {
    SimulatedCluster c = cluster;
    cluster = null;
    if (c != null) {
      c.close();
    }
  }

  @Override
  public boolean supportsParameter(ParameterContext p, ExtensionContext e) {
    return p.getParameter().getType() == SimulatedCluster.class;
  }

  @Override
  public Object resolveParameter(ParameterContext p, ExtensionContext e) {
    return cluster();
  }
}
