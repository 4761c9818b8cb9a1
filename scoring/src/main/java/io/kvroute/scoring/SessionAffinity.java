package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * How a request names the endpoint its session is on. Two strategies, as upstream llm-d has:
 *
 * <ul>
 *   <li>{@link #encodedEndpointHeader(String)} — stateless: the request header (default {@code
 *       x-session-token}) carries standard base64 of the endpoint id; the gateway writes the same
 *       header on every response ({@link Decision#responseHeaders()}), so the client echoes it.
 *   <li>{@link #sessionId(List, Duration, int)} — stateful: an opaque session id from the first
 *       present header of a list (default {@code x-session-id}) is mapped to the endpoint it was
 *       last routed to, for a sliding TTL (default 300 s); nothing is written back.
 * </ul>
 *
 * <p>Used by {@link Scorers#sessionAffinity} (soft preference) and {@link Filters#sessionAffinity}
 * (hard pin). One instance may be shared by both. Thread-safe; the stateful map is bounded ({@code
 * maxSessions}; expired sessions are swept at most every 10 s and, when still full, arbitrary
 * sessions are dropped and counted in {@link #evictions()}).
 */
public final class SessionAffinity {

  /** Upstream's default stateless header. */
  public static final String DEFAULT_TOKEN_HEADER = "x-session-token";

  /** Upstream's default session-id header. */
  public static final String DEFAULT_SESSION_ID_HEADER = "x-session-id";

  private static final long SWEEP_NANOS = Duration.ofSeconds(10).toNanos();

  private record Pin(String endpointId, long expiresAt) {}

  private final boolean stateful;
  private final String tokenHeader;
  private final List<String> idHeaders;
  private final long ttlNanos;
  private final int maxSessions;
  private final ConcurrentHashMap<String, Pin> sessions;
  private final LongAdder evictions = new LongAdder();
  private volatile long lastSweep = Long.MIN_VALUE;

  private SessionAffinity(
      boolean stateful, String tokenHeader, List<String> idHeaders, Duration ttl, int max) {
    this.stateful = stateful;
    this.tokenHeader = tokenHeader;
    this.idHeaders = idHeaders;
    this.ttlNanos = ttl == null ? 0 : ttl.toNanos();
    this.maxSessions = max;
    this.sessions = stateful ? new ConcurrentHashMap<>() : null;
  }

  /**
   * The stateless strategy with the given header.
   *
   * @throws IllegalArgumentException when the header name is blank
   */
  public static SessionAffinity encodedEndpointHeader(String header) {
    if (header == null || header.isBlank()) {
      throw new IllegalArgumentException("session header must not be blank");
    }
    return new SessionAffinity(false, header, List.of(), null, 0);
  }

  /**
   * The stateful strategy.
   *
   * @param headers request headers tried in order for the session id
   * @param ttl how long a session stays pinned after its last request (> 0)
   * @param maxSessions bound on remembered sessions (>= 1)
   * @throws IllegalArgumentException naming the bad field
   */
  public static SessionAffinity sessionId(List<String> headers, Duration ttl, int maxSessions) {
    Objects.requireNonNull(headers, "headers");
    if (headers.isEmpty() || headers.stream().anyMatch(h -> h == null || h.isBlank())) {
      throw new IllegalArgumentException("sessionIdConfig.sources must name at least one header");
    }
    if (ttl == null || ttl.isNegative() || ttl.isZero()) {
      throw new IllegalArgumentException("evictionTtlSeconds must be > 0, was " + ttl);
    }
    if (maxSessions < 1) {
      throw new IllegalArgumentException("maxSessions must be >= 1, was " + maxSessions);
    }
    return new SessionAffinity(true, null, List.copyOf(headers), ttl, maxSessions);
  }

  /** The stateful strategy with {@code x-session-id}, 300 s and 100,000 sessions. */
  public static SessionAffinity sessionId() {
    return sessionId(List.of(DEFAULT_SESSION_ID_HEADER), Duration.ofSeconds(300), 100_000);
  }

  /** True for the stateful ({@code session_id}) strategy. */
  public boolean stateful() {
    return stateful;
  }

  /** The endpoint id the request's session is pinned to, if any (and, if stateful, unexpired). */
  public Optional<String> endpointId(SchedulingRequest request, long nanoTime) {
    if (!stateful) {
      Optional<String> token = request.header(tokenHeader);
      if (token.isEmpty() || token.get().isBlank()) {
        return Optional.empty();
      }
      try {
        return Optional.of(
            new String(Base64.getDecoder().decode(token.get().trim()), StandardCharsets.UTF_8));
      } catch (IllegalArgumentException e) {
        return Optional.empty(); // not base64: treat as no session
      }
    }
    String id = sessionIdOf(request);
    if (id == null) {
      return Optional.empty();
    }
    Pin p = sessions.get(id);
    if (p == null || p.expiresAt() - nanoTime <= 0) {
      return Optional.empty();
    }
    return Optional.of(p.endpointId());
  }

  /** Records the endpoint a request was routed to (stateful strategy only). */
  void record(SchedulingRequest request, Endpoint endpoint, long nanoTime) {
    if (!stateful) {
      return;
    }
    String id = sessionIdOf(request);
    if (id == null) {
      return;
    }
    sweep(nanoTime);
    sessions.put(id, new Pin(endpoint.id(), nanoTime + ttlNanos));
  }

  /** Adds the response headers for a request served by {@code endpoint} (stateless only). */
  void responseHeaders(Endpoint endpoint, Map<String, String> out) {
    if (!stateful) {
      out.put(
          tokenHeader,
          Base64.getEncoder().encodeToString(endpoint.id().getBytes(StandardCharsets.UTF_8)));
    }
  }

  /** Sessions remembered (0 for the stateless strategy). */
  public int size() {
    return stateful ? sessions.size() : 0;
  }

  /** Sessions dropped before expiry because the map was full. */
  public long evictions() {
    return evictions.sum();
  }

  private String sessionIdOf(SchedulingRequest request) {
    for (String h : idHeaders) {
      Optional<String> v = request.header(h);
      if (v.isPresent() && !v.get().isBlank()) {
        return v.get();
      }
    }
    return null;
  }

  private void sweep(long now) {
    boolean full = sessions.size() >= maxSessions;
    if (!full && now - lastSweep < SWEEP_NANOS && lastSweep != Long.MIN_VALUE) {
      return;
    }
    lastSweep = now;
    sessions.values().removeIf(p -> p.expiresAt() - now <= 0);
    if (sessions.size() >= maxSessions) {
      int target = Math.max(0, maxSessions - Math.max(1, maxSessions / 10));
      for (Iterator<String> it = sessions.keySet().iterator();
          it.hasNext() && sessions.size() > target; ) {
        it.next();
        it.remove();
        evictions.increment();
      }
    }
  }

  @Override
  public String toString() {
    return stateful
        ? "SessionAffinity{session_id " + idHeaders + ", ttl=" + Duration.ofNanos(ttlNanos) + "}"
        : "SessionAffinity{encoded_endpoint_header " + tokenHeader + "}";
  }
}
