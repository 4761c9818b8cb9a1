/** The lmcache KV connector. */
package io.kvroute.connector.lmcache;
