package io.kvroute.connector;

/**
 * Which part of a request an HTTP call is: one of the two legs of a disaggregated request, or not.
 */
public enum Leg {
  /** The prefill leg: computes the prompt's KV cache, usually returning one token. */
  PREFILL,
  /** The decode leg: generates the response the client sees. */
  DECODE,
  /**
   * A call outside the two legs: a health probe, {@code /tokenize}, {@code /metrics}, a bootstrap
   * query, a call to the KV-cache manager service.
   */
  AUXILIARY
}
