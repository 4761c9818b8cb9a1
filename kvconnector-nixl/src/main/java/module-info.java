/** The {@code nixl} connector (vLLM's NixlConnector protocol) and the {@code fallback} chain. */
module io.kvroute.connector.nixl {
  requires transitive io.kvroute.connector.http;

  exports io.kvroute.connector.nixl;

  // The parameter records are bound by Jackson.
  opens io.kvroute.connector.nixl to
      com.fasterxml.jackson.databind;

  provides io.kvroute.connector.KVConnectorProvider with
      io.kvroute.connector.nixl.NixlConnector.Provider,
      io.kvroute.connector.nixl.FallbackConnector.Provider;
}
