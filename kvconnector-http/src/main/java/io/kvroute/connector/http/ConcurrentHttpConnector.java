package io.kvroute.connector.http;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.Leg;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.http.internal.ConcurrentLegs;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * The base of connectors whose prefill leg runs at the same time as the decode leg (SGLang, vLLM's
 * MooncakeConnector): a subclass builds the two legs of an attempt ({@link #attempt}); this class
 * sends them.
 *
 * <ul>
 *   <li>{@link #proxy} sends both legs and hands out the decode response only once the prefill
 *       succeeded too (so a dead prefill is seen before any decode byte reaches the client, and the
 *       pair can still be retried). A failure of either leg cancels the other and fails the result
 *       with that leg's error; cancelling the result cancels both.
 *   <li>{@link #prepareDecode} starts the prefill detached (bounded by the prefill timeout,
 *       reported to the listener) and returns the decode request for the gateway to send.
 * </ul>
 *
 * <p>A request without a prefill endpoint goes to decode only ({@link #decodeOnly}). Thread-safe
 * when subclasses keep no per-request state in fields.
 */
public abstract class ConcurrentHttpConnector extends AbstractHttpConnector {

  /**
   * The two legs of one attempt.
   *
   * @param prefillHeaders the prefill leg's headers
   * @param prefillBody the prefill leg's body, posted to the client's path on the prefill endpoint
   * @param decode the decode leg
   * @param prefillSettled runs once with the prefill's failure (or null on success) before the
   *     prefill's outcome is passed on
   */
  public record Attempt(
      Map<String, List<String>> prefillHeaders,
      ObjectNode prefillBody,
      DecodeRequest decode,
      Consumer<Throwable> prefillSettled) {}

  /** Reads the common parameters from {@code context.config()}, leaving other keys unchecked. */
  protected ConcurrentHttpConnector(KVConnectorProvider.Context context) {
    super(context);
  }

  /** A connector whose common parameters are {@code parameters}. */
  protected ConcurrentHttpConnector(
      KVConnectorProvider.Context context, HttpParameters parameters) {
    super(context, parameters);
  }

  /**
   * The legs of one attempt of the disaggregated request {@code pd}, whose client body (parsed, its
   * client-sent transfer fields removed) is {@code body}. A {@link
   * io.kvroute.connector.ConnectorException} thrown here fails the request.
   */
  protected abstract CompletableFuture<Attempt> attempt(PdRequest pd, ObjectNode body);

  /** Starts the prefill leg detached and returns the decode leg. */
  @Override
  public final CompletableFuture<DecodeRequest> prepareDecode(PdRequest pd) {
    return prepareDisaggregated(pd, body -> cancellable(attempt(pd, body), a -> detached(pd, a)));
  }

  /** The decode leg of {@code a}, its prefill leg started and left to run on its own. */
  private CompletableFuture<DecodeRequest> detached(PdRequest pd, Attempt a) {
    sendPrefill(pd, a); // bounded by the prefill timeout, reported to the listener
    return CompletableFuture.completedFuture(a.decode());
  }

  /** Sends both legs together; see the class description. */
  @Override
  public final CompletableFuture<StreamingResponse> proxy(PdRequest pd) {
    if (!pd.disaggregated()) {
      return super.proxy(pd);
    }
    return withClientBody(
        pd,
        body ->
            cancellable(
                attempt(pd, body),
                a -> ConcurrentLegs.join(sendPrefill(pd, a), sendDecode(a.decode()))));
  }

  /**
   * Starts the prefill leg of {@code a}: timed out after the prefill timeout, its 2xx JSON answer
   * parsed (at most {@code maxPrefillResponseBytes}), a non-2xx answer turned into an {@link
   * io.kvroute.connector.UpstreamException}, its outcome reported to the listener. Cancelling the
   * future releases the upstream call at whatever stage it is.
   */
  private CompletableFuture<ObjectNode> sendPrefill(PdRequest pd, Attempt a) {
    long start = context.nanoClock().getAsLong();
    HttpTransport.Outbound out =
        OpenAiJson.withBytes(
            a.prefillBody(),
            bytes ->
                HttpTransport.Outbound.post(pd.prefill(), pd.request().api().path(), bytes)
                    .leg(Leg.PREFILL)
                    .headers(a.prefillHeaders())
                    .timeout(context.prefillTimeout())
                    .build());
    return ConcurrentLegs.PrefillLeg.send(
            transport,
            out,
            maxPrefillResponseBytes(),
            resp -> errorFrom(Leg.PREFILL, pd.prefill(), resp),
            (answer, t) -> {
              reportLeg(listener::prefillEnded, pd.prefill(), start, t);
              a.prefillSettled().accept(t);
            })
        .result();
  }
}
