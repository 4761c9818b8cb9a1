package io.kvroute.router;

import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.KVConnector;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.KVConnectors;
import io.kvroute.pd.PdOrchestrator;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A router's connectors: one per model with its own configuration, one shared by the others, each
 * with the orchestrator that retries over (prefill, decode) pairs with it, created on first use.
 *
 * <p>Thread-safe.
 */
final class Pipelines {

  /** A model's connector and the orchestrator that retries over pairs with it. */
  private record Pipeline(KVConnector connector, PdOrchestrator orchestrator) {}

  private final KVConnectors connectors;
  private final Map<String, ConnectorConfig> modelConnectors;
  private final KVConnectorProvider.Context defaults;
  private final Map<String, Pipeline> pipelines = new ConcurrentHashMap<>();

  /**
   * @param modelConnectors the models with their own connector configuration
   * @param defaults the context of the other models' connector: its configuration, and the
   *     transport, executor, listener and clock every connector and orchestrator shares
   */
  Pipelines(
      KVConnectors connectors,
      Map<String, ConnectorConfig> modelConnectors,
      KVConnectorProvider.Context defaults) {
    this.connectors = connectors;
    this.modelConnectors = Map.copyOf(modelConnectors);
    this.defaults = defaults;
  }

  /**
   * Fails with {@link io.kvroute.connector.ConnectorException.UnknownConnectorException} when a
   * configured connector type has no provider: before anything runs, rather than on the first
   * request.
   */
  static void checkTypes(
      KVConnectors connectors,
      ConnectorConfig defaultConnector,
      Map<String, ConnectorConfig> modelConnectors) {
    connectors.provider(defaultConnector.type());
    modelConnectors.values().forEach(c -> connectors.provider(c.type()));
  }

  /** The orchestrator of {@code model}'s connector. */
  PdOrchestrator orchestrator(String model) {
    ConnectorConfig config = modelConnectors.get(model);
    return config == null
        ? pipelines.computeIfAbsent("default", k -> create(defaults)).orchestrator()
        : pipelines.computeIfAbsent("model:" + model, k -> create(context(config))).orchestrator();
  }

  private KVConnectorProvider.Context context(ConnectorConfig config) {
    return KVConnectorProvider.Context.builder(config, defaults.transport(), defaults.scheduler())
        .listener(defaults.listener())
        .nanoClock(defaults.nanoClock())
        .build();
  }

  private Pipeline create(KVConnectorProvider.Context context) {
    KVConnector c = connectors.create(context);
    PdOrchestrator o =
        PdOrchestrator.builder(c, context.scheduler())
            .retry(context.config().retry())
            .listener(context.listener())
            .nanoClock(context.nanoClock())
            .build();
    return new Pipeline(c, o);
  }

  /** Forgets an endpoint's breakers and per-pair state. */
  void removeEndpoint(String endpointId) {
    pipelines.values().forEach(p -> p.orchestrator().removeEndpoint(endpointId));
  }

  /** Closes every connector. */
  void close() {
    pipelines.values().forEach(p -> p.connector().close());
  }
}
