package io.kvroute.connector.http;

import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.HttpTransportProvider;

/**
 * Registers {@link OkHttpTransport} as the default {@link HttpTransport} (see {@link
 * io.kvroute.connector.HttpTransports}).
 */
public final class OkHttpTransportProvider implements HttpTransportProvider {

  /** For {@link java.util.ServiceLoader}. */
  public OkHttpTransportProvider() {}

  @Override
  public HttpTransport create() {
    return OkHttpTransport.create();
  }
}
