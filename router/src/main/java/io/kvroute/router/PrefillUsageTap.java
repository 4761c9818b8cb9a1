package io.kvroute.router;

import io.kvroute.connector.CancellableFutures;
import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.Leg;
import io.kvroute.connector.StreamingResponse;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The transport the router's connectors use: the router's own, plus a scan of the usage block of
 * prefill answers for the attempts that asked for it, so routing accuracy can be measured for
 * disaggregated requests (whose decode engine counts the transferred KV as cached). An attempt is
 * found by the {@code X-Request-Id} its legs carry; when two requests in flight share one (a client
 * reusing ids), the second is not measured. Every other call passes through untouched.
 *
 * <p>Thread-safe. Closing it does not close the router's transport.
 */
final class PrefillUsageTap implements HttpTransport {

  /** The prefill usage of one attempt; -1 until seen. */
  static final class Usage {
    volatile long promptTokens = -1;
    volatile long cachedTokens = -1;
  }

  private final HttpTransport delegate;
  private final Map<String, Usage> attempts = new ConcurrentHashMap<>();

  PrefillUsageTap(HttpTransport delegate) {
    this.delegate = delegate;
  }

  /** Starts watching the prefill leg of the attempt with this request id; null when taken. */
  Usage watch(String attemptRequestId) {
    Usage u = new Usage();
    return attempts.putIfAbsent(attemptRequestId, u) == null ? u : null;
  }

  /** Stops watching. */
  void unwatch(String attemptRequestId, Usage usage) {
    if (usage != null) {
      attempts.remove(attemptRequestId, usage);
    }
  }

  @Override
  public CompletableFuture<StreamingResponse> send(Outbound request) {
    if (request.leg() != Leg.PREFILL || attempts.isEmpty()) {
      return delegate.send(request);
    }
    List<String> ids = request.headers().get(InferenceRequest.REQUEST_ID_HEADER);
    Usage u = ids == null || ids.isEmpty() ? null : attempts.get(ids.get(0));
    if (u == null) {
      return delegate.send(request);
    }
    return CancellableFutures.compose(
        delegate.send(request), resp -> CompletableFuture.completedFuture(scanned(resp, u)));
  }

  /** A prefill answer whose body is scanned for its usage on the way through. */
  private static StreamingResponse scanned(StreamingResponse response, Usage usage) {
    UsageScanner scanner = new UsageScanner();
    return StreamingResponse.tap(
        response,
        scanner::scan,
        end -> {
          if (end == null && response.status() / 100 == 2) {
            usage.promptTokens = scanner.promptTokens();
            usage.cachedTokens = scanner.cachedTokens();
          }
        });
  }

  @Override
  public void close() {
    // the router closes its transport itself
  }
}
