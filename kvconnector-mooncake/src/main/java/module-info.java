/** The {@code mooncake} (vLLM MooncakeConnector) and {@code mooncake-store} connectors. */
module io.kvroute.connector.mooncake {
  requires transitive io.kvroute.connector.http;

  exports io.kvroute.connector.mooncake;

  // The parameter records are bound by Jackson.
  opens io.kvroute.connector.mooncake to
      com.fasterxml.jackson.databind;

  provides io.kvroute.connector.KVConnectorProvider with
      io.kvroute.connector.mooncake.MooncakeConnector.Provider,
      io.kvroute.connector.mooncake.MooncakeStoreConnector.Provider;
}
