package io.kvroute.connector.sidecar;

import io.kvroute.connector.Endpoint;
import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.Leg;
import io.kvroute.connector.StreamingResponse;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;

/**
 * An {@link HttpTransport} that sends each leg through its own transport, so prefill and decode
 * pods can have different TLS settings (llm-d's {@code --enable-tls=prefiller,decoder} and {@code
 * --tls-insecure-skip-verify=<stages>}): for example prefill pods behind HTTPS with a private CA
 * and decode pods on plain HTTP next to the gateway.
 *
 * <pre>{@code
 * HttpTransport prefillTls = OkHttpTransport.builder().trustStore(prefillCa).build();
 * HttpTransport decodePlain = OkHttpTransport.create();
 * HttpTransport transport = PerLegTransport.of(prefillTls, decodePlain);
 * // give `transport` to KVConnectorProvider.Context; every connector then uses it per leg
 * }</pre>
 *
 * <p>Whether a leg uses TLS at all follows the endpoint's scheme ({@code https}); the per-leg
 * transport decides which certificates it trusts. Auxiliary calls (health probes, {@code
 * /tokenize}, {@code /metrics}) go through the prefill transport for endpoints whose role is {@link
 * Endpoint.Role#PREFILL}, else the decode transport. {@link #close()} closes both (once each, even
 * when they are the same object).
 *
 * <p>Thread-safe when both transports are.
 */
public final class PerLegTransport implements HttpTransport {
  private final HttpTransport prefill;
  private final HttpTransport decode;

  private PerLegTransport(HttpTransport prefill, HttpTransport decode) {
    this.prefill = Objects.requireNonNull(prefill, "prefill");
    this.decode = Objects.requireNonNull(decode, "decode");
  }

  /** Prefill legs through {@code prefill}, decode legs through {@code decode}. */
  public static PerLegTransport of(HttpTransport prefill, HttpTransport decode) {
    return new PerLegTransport(prefill, decode);
  }

  /** The transport used for {@code leg}. */
  public HttpTransport forLeg(Leg leg) {
    return leg == Leg.PREFILL ? prefill : decode;
  }

  /**
   * The transport for {@code request}: by its leg, and for {@link Leg#AUXILIARY} calls (health
   * probes, {@code /tokenize}, {@code /metrics}) by the role of the endpoint they go to.
   */
  private HttpTransport transportFor(Outbound request) {
    Leg leg = request.leg();
    if (leg == Leg.AUXILIARY) {
      leg = request.endpoint().role() == Endpoint.Role.PREFILL ? Leg.PREFILL : Leg.DECODE;
    }
    return forLeg(leg);
  }

  @Override
  public CompletableFuture<StreamingResponse> send(Outbound request) {
    return transportFor(request).send(request);
  }

  @Override
  public void close() {
    try {
      prefill.close();
    } finally {
      if (decode != prefill) {
        decode.close();
      }
    }
  }
}
