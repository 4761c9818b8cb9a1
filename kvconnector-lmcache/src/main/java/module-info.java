/** The {@code lmcache} connector. */
module io.kvroute.connector.lmcache {
  requires transitive io.kvroute.connector.http;

  exports io.kvroute.connector.lmcache;

  // The parameter records are bound by Jackson.
  opens io.kvroute.connector.lmcache to
      com.fasterxml.jackson.databind;

  provides io.kvroute.connector.KVConnectorProvider with
      io.kvroute.connector.lmcache.LmcacheConnector.Provider;
}
