/**
 * vLLM's P2pNcclConnector (xPyD): the {@code p2pnccl} connector, which addresses a request's KV
 * transfer through the request id both legs carry, and {@link
 * io.kvroute.connector.p2pnccl.P2pNcclRegistry}, the ZMQ registration listener prefill and decode
 * instances announce themselves to (endpoint discovery).
 */
package io.kvroute.connector.p2pnccl;
