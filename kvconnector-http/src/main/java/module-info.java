/**
 * The OkHttp {@link io.kvroute.connector.HttpTransport}, the OpenAI JSON rules, the {@code http}
 * and {@code shared-storage} connectors and the base class of HTTP connectors.
 */
module io.kvroute.connector.http {
  requires transitive io.kvroute.connector;
  requires transitive com.fasterxml.jackson.databind;
  requires okhttp3;

  exports io.kvroute.connector.http;

  provides io.kvroute.connector.KVConnectorProvider with
      io.kvroute.connector.http.HttpConnector.Provider,
      io.kvroute.connector.http.SharedStorageConnector.Provider;
  provides io.kvroute.connector.HttpTransportProvider with
      io.kvroute.connector.http.OkHttpTransportProvider;
}
