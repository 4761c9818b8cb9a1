/**
 * Hash parity between kvroute and a vLLM engine: {@link io.kvroute.kvindex.parity.ParityCheck}
 * predicts the block hashes an engine publishes for a prompt and, when they are not published,
 * {@link io.kvroute.kvindex.parity.ParityCheck#diagnose diagnoses} why (block size, hash algorithm,
 * {@code PYTHONHASHSEED}, token ids), each cause with a fix. Used by the router's parity check and
 * by {@code kvroute doctor}. Pure, immutable and thread-safe.
 */
package io.kvroute.kvindex.parity;
