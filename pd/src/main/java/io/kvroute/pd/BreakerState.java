package io.kvroute.pd;

/** The state of an endpoint's circuit breaker, as {@link PdOrchestrator#breakerState} reports. */
public enum BreakerState {
  /** Calls pass; failures are being counted. */
  CLOSED,
  /** The endpoint is ejected (within the ejection cap) until the open period ends. */
  OPEN,
  /** The open period ended; a few trial calls decide whether it closes or opens again. */
  HALF_OPEN
}
