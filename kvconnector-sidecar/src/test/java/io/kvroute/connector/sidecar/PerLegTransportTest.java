package io.kvroute.connector.sidecar;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.KVConnector;
import io.kvroute.connector.KVConnector.PdRequest;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.KVConnectors;
import io.kvroute.connector.Leg;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.UpstreamException;
import io.kvroute.connector.contract.KVConnectorContract;
import io.kvroute.connector.http.OkHttpTransport;
import java.nio.charset.StandardCharsets;
import java.security.KeyStore;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import mockwebserver3.MockResponse;
import mockwebserver3.MockWebServer;
import mockwebserver3.RecordedRequest;
import okhttp3.tls.HandshakeCertificates;
import okhttp3.tls.HeldCertificate;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Per-leg TLS: an HTTPS prefill pod with a self-signed certificate and a plain-HTTP decode pod,
 * with the prefill-target header checked by the allowlist first, as a sidecar runs them.
 */
class PerLegTransportTest {
  private static final HeldCertificate CERT =
      new HeldCertificate.Builder().addSubjectAlternativeName("127.0.0.1").build();

  private final PrefillTargetAllowlist allow =
      PrefillTargetAllowlist.builder().allowHost("127.0.0.1").build();
  private MockWebServer prefill;
  private MockWebServer decode;
  private ScheduledExecutorService scheduler;

  @BeforeEach
  void start() throws Exception {
    prefill = new MockWebServer();
    prefill.useHttps(
        new HandshakeCertificates.Builder().heldCertificate(CERT).build().sslSocketFactory());
    prefill.start();
    decode = new MockWebServer();
    decode.start();
    scheduler = Executors.newSingleThreadScheduledExecutor();
  }

  @AfterEach
  void stop() {
    scheduler.shutdownNow();
    prefill.close();
    decode.close();
  }

  private static KeyStore trusting(HeldCertificate cert) throws Exception {
    KeyStore ks = KeyStore.getInstance(KeyStore.getDefaultType());
    ks.load(null, null);
    ks.setCertificateEntry("prefill-ca", cert.certificate());
    return ks;
  }

  private KVConnector http(PerLegTransport t) {
    return KVConnectors.discover(getClass().getClassLoader())
        .create(
            KVConnectorProvider.Context.builder(ConnectorConfig.of("http"), t, scheduler).build());
  }

  /** Prefill transport {@code prefillLeg} and a plain one for decode. */
  private static PerLegTransport perLeg(OkHttpTransport prefillLeg) {
    return PerLegTransport.of(prefillLeg, OkHttpTransport.create());
  }

  /** A completion whose prefill target, the TLS pod, comes through {@link #allow}. */
  private PdRequest pd() {
    InferenceRequest req =
        InferenceRequest.of(
            InferenceRequest.Api.COMPLETIONS,
            "{\"prompt\":\"x\"}".getBytes(StandardCharsets.UTF_8),
            Map.of("x-prefiller-host-port", List.of("https://127.0.0.1:" + prefill.getPort())),
            "id-1");
    Endpoint p = allow.prefillTarget(req.headers()).orElseThrow();
    return new PdRequest(req, p, Endpoint.of(decode.url("/").toString(), Endpoint.Role.DECODE));
  }

  private static MockResponse ok(String body) {
    return KVConnectorContract.json(200, body);
  }

  @Test
  void prefillOverTlsDecodeInPlainText() throws Exception {
    prefill.enqueue(ok("{\"choices\":[]}"));
    decode.enqueue(ok("{\"done\":true}"));
    try (PerLegTransport t = perLeg(OkHttpTransport.builder().trustStore(trusting(CERT)).build())) {
      byte[] body =
          http(t).proxy(pd()).get(30, TimeUnit.SECONDS).readAll(1 << 16).get(30, TimeUnit.SECONDS);
      assertThat(new String(body, StandardCharsets.UTF_8)).isEqualTo("{\"done\":true}");
      RecordedRequest p = prefill.takeRequest(5, TimeUnit.SECONDS);
      assertThat(p.getHandshake()).as("prefill leg used TLS").isNotNull();
      assertThat(decode.takeRequest(5, TimeUnit.SECONDS).getHandshake()).isNull();
      assertThat(t.forLeg(Leg.PREFILL)).isNotSameAs(t.forLeg(Leg.DECODE));
    }
  }

  @Test
  void untrustedCertificateFailsThePrefillLeg() throws Exception {
    decode.enqueue(ok("{}"));
    HeldCertificate other =
        new HeldCertificate.Builder().addSubjectAlternativeName("127.0.0.1").build();
    try (PerLegTransport t =
        perLeg(OkHttpTransport.builder().trustStore(trusting(other)).build())) {
      Throwable failure = KVConnectorContract.failure(http(t).proxy(pd()));
      assertThat(failure).isInstanceOf(UpstreamException.class);
      UpstreamException u = (UpstreamException) failure;
      assertThat(u.leg()).isEqualTo(Leg.PREFILL);
      assertThat(u.kind()).isEqualTo(UpstreamException.Kind.IO);
      assertThat(decode.getRequestCount()).isZero();
    }
  }

  @Test
  void insecureSkipVerifyOnThePrefillLegOnly() throws Exception {
    prefill.enqueue(ok("{}"));
    decode.enqueue(ok("{\"ok\":1}"));
    try (PerLegTransport t =
        perLeg(OkHttpTransport.builder().insecureSkipVerifyForTestsOnly().build())) {
      assertThat(http(t).proxy(pd()).get(30, TimeUnit.SECONDS).status()).isEqualTo(200);
    }
  }

  @Test
  void auxiliaryCallsGoThroughTheRoleTransport() throws Exception {
    prefill.enqueue(new MockResponse.Builder().code(200).build());
    try (PerLegTransport t = perLeg(OkHttpTransport.builder().trustStore(trusting(CERT)).build())) {
      Endpoint p = Endpoint.of("https://127.0.0.1:" + prefill.getPort(), Endpoint.Role.PREFILL);
      StreamingResponse r =
          t.send(HttpTransport.Outbound.get(p, "/health").build()).get(30, TimeUnit.SECONDS);
      r.cancel();
      assertThat(r.status()).isEqualTo(200);
    }
  }
}
