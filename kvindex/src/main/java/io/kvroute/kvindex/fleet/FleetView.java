package io.kvroute.kvindex.fleet;

import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * What one scheduling cycle sees of the fleet, per candidate endpoint: the requests and tokens in
 * flight on it (sent by any replica, this one included, and not finished), and how many blocks of
 * the request's prefix some replica just sent to it (speculative entries, not yet confirmed by the
 * engine's KV events). Built by {@link FleetState#view}; immutable.
 *
 * <p>{@link #source()} says which view decided: {@link Source#FLEET} (the shared store answered
 * within the deadline) or {@link Source#LOCAL} (this replica's own counts and entries only: the
 * store was slow, down, or is not shared).
 */
public final class FleetView {

  /** Which view answered. */
  public enum Source {
    /** The fleet-wide view: every replica's counts and speculative entries. */
    FLEET,
    /** This replica's own counts and speculative entries (the store did not answer in time). */
    LOCAL
  }

  private final Source source;
  private final List<String> endpoints;
  private final long[] requests;
  private final long[] tokens;
  private final int[] speculative;

  private FleetView(
      Source source, List<String> endpoints, long[] requests, long[] tokens, int[] speculative) {
    this.source = source;
    this.endpoints = endpoints;
    this.requests = requests;
    this.tokens = tokens;
    this.speculative = speculative;
  }

  /**
   * A view of {@code endpoints} (the arrays are indexed like it and copied).
   *
   * @throws IllegalArgumentException if an array's length is not the number of endpoints
   */
  public static FleetView of(
      Source source,
      List<String> endpoints,
      long[] inFlightRequests,
      long[] inFlightTokens,
      int[] speculativeBlocks) {
    Objects.requireNonNull(source, "source");
    List<String> eps = List.copyOf(endpoints);
    int n = eps.size();
    if (inFlightRequests.length != n
        || inFlightTokens.length != n
        || speculativeBlocks.length != n) {
      throw new IllegalArgumentException(
          "FleetView arrays must have one value per endpoint (" + n + ")");
    }
    return new FleetView(
        source, eps, inFlightRequests.clone(), inFlightTokens.clone(), speculativeBlocks.clone());
  }

  /** Which view answered. */
  public Source source() {
    return source;
  }

  /** The number of endpoints. */
  public int size() {
    return endpoints.size();
  }

  /** The endpoints, in the order they were asked for. */
  public List<String> endpoints() {
    return endpoints;
  }

  /** The id of endpoint {@code i}. */
  public String endpointId(int i) {
    return endpoints.get(i);
  }

  /** The position of {@code endpointId} in this view, or -1. */
  public int indexOf(String endpointId) {
    return endpoints.indexOf(endpointId);
  }

  /** Requests in flight on endpoint {@code i}, fleet-wide (or this replica's, if local). */
  public long inFlightRequests(int i) {
    return requests[Objects.checkIndex(i, requests.length)];
  }

  /** Tokens in flight on endpoint {@code i} (as the replicas counted them when sending). */
  public long inFlightTokens(int i) {
    return tokens[Objects.checkIndex(i, tokens.length)];
  }

  /**
   * Blocks of the request's prefix that some replica sent to endpoint {@code i} within the
   * speculative TTL (0 if none, or no request keys were given).
   */
  public int speculativeBlocks(int i) {
    return speculative[Objects.checkIndex(i, speculative.length)];
  }

  @Override
  public String toString() {
    StringBuilder sb = new StringBuilder("FleetView{").append(source);
    for (int i = 0; i < endpoints.size(); i++) {
      sb.append(", ")
          .append(endpoints.get(i))
          .append("=")
          .append(requests[i])
          .append("r/")
          .append(tokens[i])
          .append("t/")
          .append(speculative[i])
          .append("s");
    }
    return sb.append('}').toString();
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof FleetView v
        && v.source == source
        && v.endpoints.equals(endpoints)
        && Arrays.equals(v.requests, requests)
        && Arrays.equals(v.tokens, tokens)
        && Arrays.equals(v.speculative, speculative);
  }

  @Override
  public int hashCode() {
    return Objects.hash(
        source,
        endpoints,
        Arrays.hashCode(requests),
        Arrays.hashCode(tokens),
        Arrays.hashCode(speculative));
  }
}
