/**
 * kvroute's composition root: {@link io.kvroute.assembly.RouterSettings}, the one settings record
 * (bound by {@link io.kvroute.config.ConfigBinder}), and {@link
 * io.kvroute.assembly.RouterAssembly}, which builds the router, its index and its endpoint
 * discovery from it. {@code kvroute gateway}, {@code kvroute epp} and the Spring Cloud Gateway
 * starter build their router here.
 */
package io.kvroute.assembly;
