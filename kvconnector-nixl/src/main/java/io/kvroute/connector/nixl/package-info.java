/** The nixl KV connector. */
package io.kvroute.connector.nixl;
