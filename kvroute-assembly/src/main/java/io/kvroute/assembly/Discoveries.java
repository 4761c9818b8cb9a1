package io.kvroute.assembly;

import io.kvroute.kubernetes.EndpointSink;
import io.kvroute.kubernetes.KubernetesDiscovery;
import io.kvroute.router.KvRouter;
import io.micrometer.core.instrument.MeterRegistry;

/**
 * {@code discovery.kubernetes}. Its own class, so that nothing of the optional {@code
 * kvroute-kubernetes} (and fabric8) is loaded unless the setting is given.
 */
final class Discoveries {
  private Discoveries() {}

  /** A discovery that runs until closed. */
  interface Running extends AutoCloseable {
    /** What it discovers where, for start-up messages. */
    String description();

    @Override
    void close();

    /** Both discoveries, {@code a} closed last; either may be null. */
    static Running both(Running a, Running b) {
      if (a == null || b == null) {
        return a == null ? b : a;
      }
      return new Running() {
        @Override
        public String description() {
          return a.description() + "; " + b.description();
        }

        @Override
        public void close() {
          try {
            b.close();
          } finally {
            a.close();
          }
        }
      };
    }
  }

  /** Starts discovering the pods {@code k} describes into {@code router}. */
  static Running start(RouterSettings.Kubernetes k, KvRouter router, MeterRegistry meters) {
    KubernetesDiscovery.Builder b =
        KubernetesDiscovery.builder(EndpointSink.of(router))
            .namespace(k.namespace())
            .roleLabel(k.roleLabel())
            .port(k.port())
            .kvEventsPort(k.kvEventsPort())
            .dataParallelSize(k.dataParallelSize())
            .loraAdapters(k.loraAdapters())
            .meterRegistry(meters);
    if (k.inferencePool() != null) {
      b.inferencePool(k.inferencePool());
    } else {
      b.selector(k.selector());
    }
    KubernetesDiscovery d = b.build().start();
    String what =
        "discovering pods in Kubernetes namespace "
            + d.namespace()
            + (k.inferencePool() != null ? " (InferencePool " + k.inferencePool() + ")" : "");
    return new Running() {
      @Override
      public String description() {
        return what;
      }

      @Override
      public void close() {
        d.close();
      }

      @Override
      public String toString() {
        return what;
      }
    };
  }
}
