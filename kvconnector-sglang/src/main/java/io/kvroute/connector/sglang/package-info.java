/** The sglang KV connector. */
package io.kvroute.connector.sglang;
