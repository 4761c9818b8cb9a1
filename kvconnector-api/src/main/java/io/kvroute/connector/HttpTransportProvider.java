package io.kvroute.connector;

/**
 * Creates the default {@link HttpTransport}. Found with {@link java.util.ServiceLoader} through a
 * {@code META-INF/services/io.kvroute.connector.HttpTransportProvider} entry (or a {@code provides}
 * clause on the module path); {@code kvconnector-http} registers the OkHttp transport. See {@link
 * HttpTransports}.
 *
 * <p>Providers must have a public no-argument constructor and be thread-safe.
 */
public interface HttpTransportProvider {

  /** A new transport with default settings; its caller closes it. */
  HttpTransport create();
}
