/**
 * The OkHttp {@link io.kvroute.connector.HttpTransport}, the OpenAI JSON rules, the {@code http}
 * and {@code shared-storage} connectors, the base class of HTTP connectors, and the typed connector
 * parameters ({@link io.kvroute.connector.http.TypedConnectorProvider}).
 */
module io.kvroute.connector.http {
  requires transitive io.kvroute.connector;
  requires transitive com.fasterxml.jackson.databind;
  // Connector parameters are records bound by the configuration binder; their checks throw its
  // ConfigException.
  requires transitive io.kvroute.config;
  requires okhttp3;

  exports io.kvroute.connector.http;

  // The parameter records are bound by Jackson.
  opens io.kvroute.connector.http to
      com.fasterxml.jackson.databind;

  provides io.kvroute.connector.KVConnectorProvider with
      io.kvroute.connector.http.HttpConnector.Provider,
      io.kvroute.connector.http.SharedStorageConnector.Provider;
  provides io.kvroute.connector.HttpTransportProvider with
      io.kvroute.connector.http.OkHttpTransportProvider;
}
