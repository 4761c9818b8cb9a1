/**
 * Block hashing: {@link io.kvroute.kvindex.hash.VllmBlockHasher} reproduces vLLM's prefix-cache
 * hashes exactly (sha256 over pickle protocol 5, sha256_cbor, the legacy sha256_cbor_64bit chain,
 * xxhash and xxhash_cbor with a built-in XXH3-128), verified against vectors produced by vLLM's own
 * code; {@link io.kvroute.kvindex.hash.RequestKeyHasher} computes the index's fast 64-bit request
 * keys. All types are immutable and thread-safe.
 */
package io.kvroute.kvindex.hash;
