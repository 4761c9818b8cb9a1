/** Helpers for gateways and sidecars that take a prefill target from a header. */
package io.kvroute.connector.sidecar;
