/**
 * Hybrid-attention models (Gemma-3, gpt-oss, Jamba/Nemotron-H-style mamba hybrids): a {@link
 * io.kvroute.kvindex.BlockIndex} layer that keeps a pod's KV-cache groups apart and matches a
 * prompt by vLLM's hybrid cache-coordinator rule, so that an engine is scored on the prefix it can
 * actually reuse ({@link io.kvroute.kvindex.hybrid.HybridBlockIndex}).
 */
package io.kvroute.kvindex.hybrid;
