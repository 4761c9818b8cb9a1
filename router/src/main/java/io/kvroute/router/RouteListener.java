package io.kvroute.router;

import io.kvroute.connector.EngineUsage;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.pd.PdOrchestrator;
import io.kvroute.scoring.ReuseSplit;
import java.util.Map;
import java.util.Optional;

/**
 * Observes the requests {@link KvRouter#route} runs, from arrival to the end of the response
 * stream: the hook a tracing binding implements ({@code kvroute-opentelemetry}'s {@code
 * KvRouteTracing}). Set it with {@link KvRouter.Builder#routeListener}; {@link #NONE} does nothing.
 *
 * <p>{@link #requestStarted} is called on the caller's thread for every request {@link
 * KvRouter#route} receives and returns that request's own {@link RequestListener}; the request
 * listener's methods are called on the caller's, scheduler and transport threads, never
 * concurrently for one request. Implementations must be fast and must not throw. Requests decided
 * with {@link KvRouter#decide} are not observed: the gateway runs them itself.
 */
@FunctionalInterface
public interface RouteListener {

  /** A listener that ignores everything. */
  RouteListener NONE = request -> RequestListener.NONE;

  /**
   * A request arrived at {@link KvRouter#route}; returns the listener of this one request ({@link
   * RequestListener#NONE} to ignore it).
   */
  RequestListener requestStarted(InferenceRequest request);

  /**
   * The listener of one routed request. Every method has a no-op default. Calls arrive in this
   * order: {@link #upstreamHeaders} once, {@link #decided} (unless scheduling failed), {@link
   * #attemptStarted} and {@link #attemptEnded} per (prefill, decode) attempt, {@link #engineUsage}
   * and {@link #usage} when the engines reported it, {@link #reuse} when the response completed,
   * and {@link #ended} exactly once.
   */
  interface RequestListener {
    /** A request listener that ignores everything. */
    RequestListener NONE = new RequestListener() {};

    /**
     * Headers to set on the request sent upstream on every leg, replacing the client's copies: for
     * example a W3C {@code traceparent} naming this request's span, so the engines' own spans join
     * the trace. Called once, before scheduling.
     */
    default Map<String, String> upstreamHeaders() {
      return Map.of();
    }

    /** The scheduler decided where the request goes. */
    default void decided(RouteDecision decision) {}

    /** Attempt {@code attempt} (1-based) starts on {@code pair}. */
    default void attemptStarted(int attempt, PdOrchestrator.Pair pair) {}

    /**
     * Attempt {@code attempt} on {@code pair} ended: failed before the response's first byte
     * ({@code failure} set) or, for the attempt that succeeded, when its stream ended (see {@link
     * PdOrchestrator.AttemptObserver#ended}).
     */
    default void attemptEnded(int attempt, PdOrchestrator.Pair pair, Throwable failure) {}

    /**
     * The usage reported by the engine that computed the prompt — the prefill engine's answer when
     * the request was disaggregated, else the decode response — as {@code usage.prompt_tokens} and
     * {@code usage.prompt_tokens_details.cached_tokens}; compare with {@link
     * RouteDecision#predictedCachedTokens}. Not called when that answer carried none (a stream
     * without {@code stream_options.include_usage}, an engine without {@code
     * --enable-prompt-tokens-details}) or when the request failed.
     */
    default void usage(long promptTokens, long cachedTokens) {}

    /**
     * What each leg's engine reported in its answer's usage block, once the response completed: the
     * prefill engine's (a disaggregated request whose connector read the prefill answer; it came up
     * with the response, {@link RoutedResponse#prefillUsage()}) and the decode engine's (read from
     * the end of the response). A decode engine of a disaggregated request counts the KV it
     * received as cached. Called before {@link #usage} when either is present; never for a failed
     * or cancelled request.
     */
    default void engineUsage(Optional<EngineUsage> prefill, Optional<EngineUsage> decode) {}

    /**
     * The request's reuse split, once its response completed: the prompt tokens some eligible
     * endpoint held ({@code available}), the chosen endpoint held ({@code captured}) and the engine
     * that computed the prompt reported cached ({@code delivered}, {@link ReuseSplit#UNKNOWN} when
     * it reported none), with {@link ReuseSplit#misses()} naming the causes of a miss. The same
     * split the {@code kvroute.routing.reuse.*} meters count. Called after {@link #usage}, before
     * {@link #ended}; never for a failed or cancelled request.
     */
    default void reuse(ReuseSplit split) {}

    /**
     * The request ended: its response stream completed ({@code failure} null), failed or was
     * cancelled; or it never got a response (scheduling failed, every attempt failed, the caller
     * cancelled). Called exactly once.
     *
     * @param decision the routing decision, or null when scheduling failed
     */
    default void ended(RouteDecision decision, Throwable failure) {}
  }
}
