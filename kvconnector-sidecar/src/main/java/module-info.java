/** Sidecar helpers on the SPI: the prefill-target SSRF allowlist and per-leg transports. */
module io.kvroute.connector.sidecar {
  requires transitive io.kvroute.connector;

  exports io.kvroute.connector.sidecar;
}
