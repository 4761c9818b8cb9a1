/** The {@code sglang} connector (SGLang's bootstrap-room PD protocol). */
module io.kvroute.connector.sglang {
  requires transitive io.kvroute.connector.http;

  exports io.kvroute.connector.sglang;

  provides io.kvroute.connector.KVConnectorProvider with
      io.kvroute.connector.sglang.SglangConnector.Provider;
}
