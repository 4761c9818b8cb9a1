/**
 * The {@code p2pnccl} connector (vLLM's P2pNcclConnector, xPyD) and the registration listener its
 * instances announce themselves to.
 */
module io.kvroute.connector.p2pnccl {
  requires transitive io.kvroute.connector.http;
  requires org.zeromq.jeromq;
  requires msgpack.core;
  requires org.slf4j;

  exports io.kvroute.connector.p2pnccl;

  provides io.kvroute.connector.KVConnectorProvider with
      io.kvroute.connector.p2pnccl.P2pNcclConnector.Provider;
}
