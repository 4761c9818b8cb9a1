/** The mooncake KV connector. */
package io.kvroute.connector.mooncake;
