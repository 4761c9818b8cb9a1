/** The {@code mooncake} (vLLM MooncakeConnector) and {@code mooncake-store} connectors. */
module io.kvroute.connector.mooncake {
  requires transitive io.kvroute.connector.http;

  exports io.kvroute.connector.mooncake;

  provides io.kvroute.connector.KVConnectorProvider with
      io.kvroute.connector.mooncake.MooncakeConnector.Provider,
      io.kvroute.connector.mooncake.MooncakeStoreConnector.Provider;
}
