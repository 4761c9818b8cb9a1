package io.kvroute.connector;

/** The two legs of a disaggregated request. */
public enum Leg {
  /** The prefill leg: computes the prompt's KV cache, usually returning one token. */
  PREFILL,
  /** The decode leg: generates the response the client sees. */
  DECODE
}
