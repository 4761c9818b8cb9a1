/**
 * kvroute's HTTP edge: the small HTTP/1.1 server that {@code kvroute serve}, {@code gateway} and
 * {@code proxy} share. Internal to kvroute (its API may change in any release).
 *
 * <p>Build a server with {@link io.kvroute.edge.EdgeServer#builder()}: routes map a method and a
 * path to a {@link io.kvroute.edge.Handler}, which answers an {@link io.kvroute.edge.Exchange} at
 * once or later, with a whole body or a {@link java.util.concurrent.Flow.Publisher} streamed with
 * back-pressure. The server enforces {@link io.kvroute.edge.EdgeLimits} (sizes, timeouts,
 * connections, buffered memory), serves TLS ({@link io.kvroute.edge.TlsConfig}) and an optional
 * admin listener ({@link io.kvroute.edge.AdminConfig}) that requires a bearer token.
 *
 * <p>The implementation runs on Netty; no Netty type appears in this package.
 */
package io.kvroute.edge;
