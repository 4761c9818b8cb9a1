package io.kvroute.connector.http.internal;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.connector.CancellableFutures;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.Leg;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.UpstreamException;
import io.kvroute.connector.http.OpenAiJson;
import java.io.IOException;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BiConsumer;
import java.util.function.Function;

/**
 * Runs a prefill and a decode leg at the same time. The joined result is the decode response,
 * reporting the prefill answer's usage ({@link StreamingResponse#prefillUsage()}), handed out only
 * once the prefill has succeeded too (as the SGLang model gateway does: a dead prefill is seen
 * before any decode byte reaches the client, so the pair can still be retried). A failure of either
 * leg cancels the other and fails the result with that leg's error; cancelling the result cancels
 * both. The prefill leg keeps its upstream response so that cancelling it releases the connection
 * at once, whatever stage it is in. Stateless; callbacks run on the completing leg's thread.
 *
 * <p>Used through {@link io.kvroute.connector.http.ConcurrentHttpConnector} by the connectors that
 * run both legs together (Mooncake, SGLang). Not exported.
 */
public final class ConcurrentLegs {
  private ConcurrentLegs() {}

  /** A prefill leg whose upstream call can be cancelled at any stage. */
  public static final class PrefillLeg {
    private final CompletableFuture<ObjectNode> result = new CompletableFuture<>();

    private final AtomicReference<StreamingResponse> response = new AtomicReference<>();
    private volatile CompletableFuture<StreamingResponse> head;

    /**
     * Sends {@code out} and parses its 2xx JSON answer (at most {@code maxBytes}); a non-2xx answer
     * becomes {@code errorFrom(response)}. {@code settled} runs once with the outcome before {@code
     * result} completes.
     */
    public static PrefillLeg send(
        HttpTransport transport,
        HttpTransport.Outbound out,
        int maxBytes,
        Function<StreamingResponse, CompletableFuture<UpstreamException>> errorFrom,
        BiConsumer<ObjectNode, Throwable> settled) {
      PrefillLeg leg = new PrefillLeg();
      leg.result.whenComplete(
          (r, t) -> {
            if (leg.result.isCancelled()) {
              leg.releaseUpstream();
            }
          });
      leg.head = transport.send(out);
      leg.head.whenComplete(
          (resp, t) -> {
            if (t != null) {
              leg.finish(null, CancellableFutures.unwrap(t), settled);
              return;
            }
            leg.response.set(resp);
            if (leg.result.isDone()) {
              resp.cancel();
              return;
            }
            if (resp.status() / 100 != 2) {
              errorFrom
                  .apply(resp)
                  .whenComplete((e, t2) -> leg.finish(null, e != null ? e : t2, settled));
              return;
            }
            resp.readAll(maxBytes)
                .whenComplete(
                    (bytes, t2) -> {
                      if (t2 != null) {
                        Throwable cause = CancellableFutures.unwrap(t2);
                        leg.finish(
                            null,
                            cause instanceof UpstreamException
                                ? cause
                                : new UpstreamException(
                                    Leg.PREFILL,
                                    out.endpoint().id(),
                                    UpstreamException.Kind.IO,
                                    0,
                                    null,
                                    null,
                                    "prefill response from "
                                        + out.endpoint().baseUrl()
                                        + " failed: "
                                        + cause.getMessage(),
                                    cause),
                            settled);
                        return;
                      }
                      leg.finish(parse(out, bytes), null, settled);
                    });
          });
      return leg;
    }

    private static Object parse(HttpTransport.Outbound out, byte[] bytes) {
      try {
        return jsonObject(Leg.PREFILL, out.endpoint(), bytes);
      } catch (UpstreamException e) {
        return e;
      }
    }

    private void finish(Object value, Throwable error, BiConsumer<ObjectNode, Throwable> settled) {
      if (value instanceof ConnectorException ce) {
        error = ce;
        value = null;
      }
      if (result.isDone()) {
        return;
      }
      ObjectNode node = (ObjectNode) value;
      try {
        settled.accept(node, error);
      } finally {
        if (error != null) {
          result.completeExceptionally(error);
        } else {
          result.complete(node);
        }
      }
    }

    /**
     * Completes with the prefill's JSON answer, or fails with its error; cancelling it cancels the
     * leg at whatever stage it is in.
     */
    public CompletableFuture<ObjectNode> result() {
      return result;
    }

    private void releaseUpstream() {
      CompletableFuture<StreamingResponse> h = head;
      if (h != null) {
        h.cancel(true);
      }
      StreamingResponse r = response.get();
      if (r != null) {
        r.cancel();
      }
    }
  }

  /**
   * A leg's 2xx answer as a JSON object.
   *
   * @throws UpstreamException of kind {@code PROTOCOL} when the bytes are not one JSON object
   */
  public static ObjectNode jsonObject(Leg leg, Endpoint endpoint, byte[] bytes) {
    try {
      JsonNode n = OpenAiJson.readTree(bytes);
      if (n != null && n.isObject()) {
        return (ObjectNode) n;
      }
    } catch (IOException e) {
      // reported below
    }
    throw UpstreamException.protocol(
        leg,
        endpoint.id(),
        leg.name().toLowerCase(Locale.ROOT)
            + " response from "
            + endpoint.baseUrl()
            + " is not a JSON object",
        null);
  }

  /**
   * The decode response of two legs running together; see {@link
   * io.kvroute.connector.http.ConcurrentHttpConnector}.
   */
  public static CompletableFuture<StreamingResponse> join(
      CompletableFuture<ObjectNode> prefill, CompletableFuture<StreamingResponse> decode) {
    CompletableFuture<StreamingResponse> result = new CompletableFuture<>();
    result.whenComplete(
        (r, t) -> {
          if (result.isCancelled()) {
            prefill.cancel(true);
            cancelDecode(decode);
          }
        });
    decode.whenComplete(
        (d, t) -> {
          // A decode cancelled by this class is not a decode failure.
          if (t != null && !decode.isCancelled() && !result.isDone()) {
            prefill.cancel(true);
            result.completeExceptionally(CancellableFutures.unwrap(t));
          }
        });
    prefill.whenComplete(
        (p, t) -> {
          if (t != null) {
            // A prefill cancelled by this class: the decode failure or the caller decides.
            if (!prefill.isCancelled() && !result.isDone()) {
              cancelDecode(decode);
              result.completeExceptionally(CancellableFutures.unwrap(t));
            }
            return;
          }
          decode.whenComplete(
              (d, t2) -> {
                if (t2 == null
                    && !result.complete(
                        StreamingResponse.withPrefillUsage(d, OpenAiJson.usage(p)))) {
                  d.cancel();
                }
              });
        });
    return result;
  }

  private static void cancelDecode(CompletableFuture<StreamingResponse> decode) {
    if (!decode.cancel(true)) {
      decode.thenAccept(StreamingResponse::cancel);
    }
  }
}
