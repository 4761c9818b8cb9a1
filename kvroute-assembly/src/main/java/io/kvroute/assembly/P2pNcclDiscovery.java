package io.kvroute.assembly;

import io.kvroute.config.ConfigException;
import io.kvroute.connector.ConnectorConfigException;
import io.kvroute.connector.ConnectorListener;
import io.kvroute.connector.p2pnccl.P2pNcclRegistry;
import io.kvroute.connector.sidecar.PrefillTargetAllowlist;
import java.time.Duration;
import java.util.List;

/**
 * vLLM's P2pNccl registration listener as {@code kvroute proxy --registry} and the gateway's {@code
 * discovery.p2pnccl} run it: a {@link P2pNcclRegistry} whose SSRF allowlist is a {@link
 * PrefillTargetAllowlist} of hosts (default: loopback only), its events counted by the command's
 * connector listener. Public for {@code kvroute proxy --registry}, which runs one without a router;
 * the assembly runs it for {@code discovery.p2pnccl}. Needs {@code kvconnector-p2pnccl} and {@code
 * kvconnector-sidecar} on the class path (optional dependencies of this module).
 */
public final class P2pNcclDiscovery {
  private P2pNcclDiscovery() {}

  /** The hosts registrations may name when none are given. */
  public static final List<String> LOOPBACK = List.of("127.0.0.1", "::1", "localhost");

  /**
   * Starts a registry.
   *
   * @param option the option or configuration key that named {@code bind} (for errors)
   * @param allowHosts hosts registrations may name (empty: {@link #LOOPBACK})
   * @param maxInstances null: the registry's default
   * @throws ConfigException naming {@code option} when the address cannot be bound or a value is
   *     out of range
   */
  public static P2pNcclRegistry start(
      String option,
      String bind,
      Duration ttl,
      List<String> allowHosts,
      Integer maxInstances,
      ConnectorListener events,
      P2pNcclRegistry.Listener listener) {
    PrefillTargetAllowlist.Builder allow = PrefillTargetAllowlist.builder();
    (allowHosts == null || allowHosts.isEmpty() ? LOOPBACK : allowHosts).forEach(allow::allowHost);
    PrefillTargetAllowlist allowlist = allow.build();
    try {
      P2pNcclRegistry.Builder b =
          P2pNcclRegistry.builder(bind)
              .ttl(ttl)
              .allow(allowlist::allows)
              .connectorListener(events)
              .listener(listener);
      if (maxInstances != null) {
        b.maxInstances(maxInstances);
      }
      return b.build().start();
    } catch (ConnectorConfigException e) {
      String problem = e.problem();
      String suffix = e.field().startsWith("registry.") ? " " + e.field().substring(9) : "";
      throw new ConfigException(option + suffix, problem, e);
    } catch (IllegalArgumentException e) {
      throw new ConfigException(option, e.getMessage(), e);
    }
  }
}
