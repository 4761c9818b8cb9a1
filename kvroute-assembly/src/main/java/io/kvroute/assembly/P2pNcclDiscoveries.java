package io.kvroute.assembly;

import io.kvroute.connector.Endpoint;
import io.kvroute.connector.p2pnccl.P2pNcclRegistry;
import io.kvroute.pd.MicrometerConnectorListener;
import io.kvroute.router.KvRouter;
import io.micrometer.core.instrument.MeterRegistry;

/**
 * {@code discovery.p2pnccl}. Its own class, so that nothing of the optional {@code
 * kvconnector-p2pnccl} (and JeroMQ) is loaded unless the setting is given.
 */
final class P2pNcclDiscoveries {
  private P2pNcclDiscoveries() {}

  /**
   * Starts the registration listener feeding {@code router}: an instance becomes an endpoint when
   * it registers and is removed when its heartbeats stop.
   */
  static Discoveries.Running start(
      RouterSettings.P2pNccl p, KvRouter router, MeterRegistry meters) {
    P2pNcclRegistry registry =
        P2pNcclDiscovery.start(
            "discovery.p2pnccl.registry",
            p.registry(),
            p.ttl(),
            p.allowHosts(),
            p.maxInstances(),
            new MicrometerConnectorListener(meters),
            new P2pNcclRegistry.Listener() {
              @Override
              public void joined(Endpoint e) {
                router.addEndpoint(e, null);
              }

              @Override
              public void left(Endpoint e) {
                router.removeEndpoint(e.id());
              }
            });
    String what = "P2pNccl instances register at " + registry.endpoint();
    return new Discoveries.Running() {
      @Override
      public String description() {
        return what;
      }

      @Override
      public void close() {
        registry.close();
      }

      @Override
      public String toString() {
        return what;
      }
    };
  }
}
