/**
 * kvroute's HTTP edge: the Netty HTTP/1.1 server that {@code kvroute serve}, {@code gateway} and
 * {@code proxy} share. Internal to kvroute (its API may change in any release); no Netty type
 * appears in its exported package.
 */
module io.kvroute.edge {
  requires transitive io.kvroute.connector;
  requires transitive micrometer.core;
  requires io.netty.buffer;
  requires io.netty.codec;
  requires io.netty.codec.http;
  requires io.netty.common;
  requires io.netty.handler;
  requires io.netty.transport;
  requires io.netty.transport.classes.epoll;
  requires org.slf4j;

  exports io.kvroute.edge;
}
