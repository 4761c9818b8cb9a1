package io.kvroute.kvindex.fleet;

import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * What one scheduling cycle sees of the fleet, per candidate endpoint: the requests and tokens in
 * flight on it (sent by any replica, this one included, and not finished), and how many blocks of
 * the request's prefix some replica just sent to it (speculative entries, not yet confirmed by the
 * engine's KV events), and how many blocks of its approximate prefix hashes some replica sent to it
 * within the routing memory's TTL ({@link FleetState#remember}), and when it last got a cold
 * request from any replica ({@link FleetState#coldRouted}). Built by {@link FleetState#view};
 * immutable.
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
  private final int[] remembered;
  private final long[] cold;

  private FleetView(Builder b) {
    this.source = b.source;
    this.endpoints = b.endpoints;
    this.requests = b.requests;
    this.tokens = b.tokens;
    this.speculative = b.speculative;
    this.remembered = b.remembered;
    this.cold = b.cold;
  }

  /**
   * A view of {@code endpoints} with no routing memory and no cold routing (the arrays are indexed
   * like it and copied).
   *
   * @throws IllegalArgumentException if an array's length is not the number of endpoints
   */
  public static FleetView of(
      Source source,
      List<String> endpoints,
      long[] inFlightRequests,
      long[] inFlightTokens,
      int[] speculativeBlocks) {
    return builder(source, endpoints)
        .inFlight(inFlightRequests, inFlightTokens)
        .speculativeBlocks(speculativeBlocks)
        .build();
  }

  /** A builder of a view of {@code endpoints} (every value 0 until set). */
  public static Builder builder(Source source, List<String> endpoints) {
    return new Builder(source, endpoints);
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

  /**
   * Blocks of the request's approximate prefix hashes that some replica sent to endpoint {@code i}
   * within the routing memory's TTL ({@link FleetState#remember}; 0 if none, or no hashes were
   * given).
   */
  public int rememberedBlocks(int i) {
    return remembered[Objects.checkIndex(i, remembered.length)];
  }

  /**
   * When endpoint {@code i} last got a cold request (one no candidate held any prefix of) from any
   * replica, as an order: larger is later, comparable between the endpoints of one view only; 0 if
   * none is known ({@link FleetState#coldRouted}). The no-hit LRU scorer sends the next cold
   * request where it is smallest.
   */
  public long lastColdRouted(int i) {
    return cold[Objects.checkIndex(i, cold.length)];
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
          .append("s/")
          .append(remembered[i])
          .append("m/")
          .append(cold[i])
          .append("c");
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
        && Arrays.equals(v.speculative, speculative)
        && Arrays.equals(v.remembered, remembered)
        && Arrays.equals(v.cold, cold);
  }

  @Override
  public int hashCode() {
    return Objects.hash(
        source,
        endpoints,
        Arrays.hashCode(requests),
        Arrays.hashCode(tokens),
        Arrays.hashCode(speculative),
        Arrays.hashCode(remembered),
        Arrays.hashCode(cold));
  }

  /**
   * Builds a {@link FleetView}: the arrays given are indexed like the endpoints and copied. Not
   * thread-safe.
   */
  public static final class Builder {
    private final Source source;
    private final List<String> endpoints;
    private long[] requests;
    private long[] tokens;
    private int[] speculative;
    private int[] remembered;
    private long[] cold;

    private Builder(Source source, List<String> endpoints) {
      this.source = Objects.requireNonNull(source, "source");
      this.endpoints = List.copyOf(endpoints);
      int n = this.endpoints.size();
      this.requests = new long[n];
      this.tokens = new long[n];
      this.speculative = new int[n];
      this.remembered = new int[n];
      this.cold = new long[n];
    }

    /** Requests and tokens in flight per endpoint. */
    public Builder inFlight(long[] inFlightRequests, long[] inFlightTokens) {
      this.requests = check(inFlightRequests.length, inFlightRequests.clone());
      this.tokens = check(inFlightTokens.length, inFlightTokens.clone());
      return this;
    }

    /** Speculative blocks per endpoint ({@link FleetView#speculativeBlocks}). */
    public Builder speculativeBlocks(int[] blocks) {
      this.speculative = check(blocks.length, blocks.clone());
      return this;
    }

    /** Routing-memory blocks per endpoint ({@link FleetView#rememberedBlocks}). */
    public Builder rememberedBlocks(int[] blocks) {
      this.remembered = check(blocks.length, blocks.clone());
      return this;
    }

    /** Cold-routing order per endpoint ({@link FleetView#lastColdRouted}). */
    public Builder lastColdRouted(long[] order) {
      this.cold = check(order.length, order.clone());
      return this;
    }

    private <T> T check(int length, T array) {
      if (length != endpoints.size()) {
        throw new IllegalArgumentException(
            "FleetView arrays must have one value per endpoint (" + endpoints.size() + ")");
      }
      return array;
    }

    /** The view. */
    public FleetView build() {
      return new FleetView(this);
    }
  }
}
