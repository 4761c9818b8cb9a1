/** The {@code lmcache} connector. */
module io.kvroute.connector.lmcache {
  requires transitive io.kvroute.connector.http;

  exports io.kvroute.connector.lmcache;

  provides io.kvroute.connector.KVConnectorProvider with
      io.kvroute.connector.lmcache.LmcacheConnector.Provider;
}
