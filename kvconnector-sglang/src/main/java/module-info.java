/** The {@code sglang} connector (SGLang's bootstrap-room PD protocol). */
module io.kvroute.connector.sglang {
  requires transitive io.kvroute.connector.http;

  exports io.kvroute.connector.sglang;

  // The parameter records are bound by Jackson.
  opens io.kvroute.connector.sglang to
      com.fasterxml.jackson.databind;

  provides io.kvroute.connector.KVConnectorProvider with
      io.kvroute.connector.sglang.SglangConnector.Provider;
}
