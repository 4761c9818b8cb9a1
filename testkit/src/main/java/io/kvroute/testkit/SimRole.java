package io.kvroute.testkit;

/** The disaggregation role of a simulated vLLM pod. */
public enum SimRole {
  /** Aggregated serving: prefills and decodes (vLLM {@code kv_both}, or no connector). */
  BOTH("both"),
  /** Prefill pod ({@code kv_producer}). */
  PREFILL("prefill"),
  /** Decode pod ({@code kv_consumer}). */
  DECODE("decode");

  private final String label;

  SimRole(String label) {
    this.label = label;
  }

  /** The lower-case label value ({@code both}, {@code prefill}, {@code decode}). */
  public String label() {
    return label;
  }

  /** Whether the pod may produce KV for others. */
  public boolean producer() {
    return this != DECODE;
  }

  /** Whether the pod may consume KV from others. */
  public boolean consumer() {
    return this != PREFILL;
  }
}
