/** Internals of the endpoint picker: the per-stream state machine, messages, usage scanning. */
package io.kvroute.envoy.internal;
