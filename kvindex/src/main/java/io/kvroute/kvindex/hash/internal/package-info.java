/**
 * Pre-image encoders (canonical CBOR, pickle protocol 5) and hash primitives (XXH3-128, XXH64, the
 * request-key token digest). Not part of the API: may change without notice.
 */
package io.kvroute.kvindex.hash.internal;
