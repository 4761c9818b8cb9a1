/**
 * The connector SPI: the types a KV-transfer connector is written against ({@link
 * io.kvroute.connector.KVConnector}, {@link io.kvroute.connector.KVConnectorProvider}, {@link
 * io.kvroute.connector.HttpTransport}, requests, endpoints, errors, the listener) and the Flow
 * plumbing every kvroute publisher shares. Depends on the JDK only.
 */
module io.kvroute.connector {
  exports io.kvroute.connector;

  uses io.kvroute.connector.KVConnectorProvider;
  uses io.kvroute.connector.HttpTransportProvider;
}
