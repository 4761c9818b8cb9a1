package io.kvroute.edge;

import static io.kvroute.edge.testing.Raw.read;
import static io.kvroute.edge.testing.Raw.send;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.edge.testing.Raw;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import javax.net.ssl.SSLSocket;
import okhttp3.tls.HandshakeCertificates;
import okhttp3.tls.HeldCertificate;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** TLS on both listeners (self-signed certificates) and the admin listener's bearer token. */
class EdgeTlsAdminTest {
  private static final String TOKEN = "0123456789abcdef0123456789abcdef";
  private static final String ADMIN_GET =
      "GET /admin/endpoints HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer " + TOKEN + "\r\n\r\n";
  private static HeldCertificate ca;
  private static HeldCertificate serverCert;
  private static HeldCertificate clientCert;
  @TempDir static Path dir;
  private static Path certFile;
  private static Path keyFile;
  private static Path caFile;
  private static Path tokenFile;
  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
  private EdgeServer server;

  @BeforeAll
  static void certificates() throws IOException {
    ca =
        new HeldCertificate.Builder().certificateAuthority(0).commonName("kvroute test CA").build();
    serverCert =
        new HeldCertificate.Builder()
            .signedBy(ca)
            .commonName("localhost")
            .addSubjectAlternativeName("localhost")
            .addSubjectAlternativeName("127.0.0.1")
            .build();
    clientCert = new HeldCertificate.Builder().signedBy(ca).commonName("operator").build();
    certFile = dir.resolve("server.pem");
    keyFile = dir.resolve("server.key");
    caFile = dir.resolve("ca.pem");
    tokenFile = dir.resolve("admin.token");
    Files.writeString(certFile, serverCert.certificatePem() + ca.certificatePem());
    Files.writeString(keyFile, serverCert.privateKeyPkcs8Pem());
    Files.writeString(caFile, ca.certificatePem());
    Files.writeString(tokenFile, TOKEN + "\n");
  }

  @AfterEach
  void stop() {
    if (server != null) {
      server.close();
    }
  }

  private static TlsConfig tls() {
    return TlsConfig.builder().certificateChain(certFile).privateKey(keyFile).build();
  }

  private static Socket tlsSocket(int port, boolean withClientCert) throws IOException {
    HandshakeCertificates.Builder b =
        new HandshakeCertificates.Builder().addTrustedCertificate(ca.certificate());
    if (withClientCert) {
      b.heldCertificate(clientCert);
    }
    SSLSocket s = (SSLSocket) b.build().sslSocketFactory().createSocket("127.0.0.1", port);
    s.setSoTimeout(30_000);
    s.startHandshake();
    return s;
  }

  /** Sends one request on {@code s}, reads the response, closes {@code s}. */
  private static Raw.Response exchange(Socket s, String request) throws IOException {
    try (s) {
      send(s, request);
      return read(s);
    }
  }

  /** {@code POST /admin/endpoints} on the admin listener, {@code rest} after the Host header. */
  private Raw.Response postAdmin(String rest) throws IOException {
    return exchange(
        Raw.connect(server.adminPort()), "POST /admin/endpoints HTTP/1.1\r\nHost: a\r\n" + rest);
  }

  private static Handler whoami() {
    return ex ->
        ex.respond(200, "text/plain", ("secure=" + ex.secure()).getBytes(StandardCharsets.UTF_8));
  }

  @Test
  void theTrafficListenerServesTls() throws IOException {
    server = EdgeServer.builder().tls(tls()).route("GET", "/who", whoami()).build().start();
    try (Socket s = tlsSocket(server.port(), false)) {
      for (int i = 0; i < 3; i++) {
        send(s, "GET /who HTTP/1.1\r\nHost: localhost\r\n\r\n");
        assertThat(read(s).body()).isEqualTo("secure=true");
      }
    }
    // plain HTTP to a TLS port is not served
    try (Socket plain = Raw.connect(server.port())) {
      send(plain, "GET /who HTTP/1.1\r\nHost: localhost\r\n\r\n");
      assertThatThrownBy(() -> read(plain)).isInstanceOf(IOException.class);
    }
  }

  private EdgeServer.Builder withAdmin(AdminConfig admin) {
    return EdgeServer.builder()
        .meterRegistry(registry)
        .route("GET", "/who", whoami())
        .admin(admin)
        .adminRoute("GET", "/admin/endpoints", whoami())
        .adminRoute("POST", "/admin/endpoints", ex -> ex.respond(201, "text/plain", ex.body()));
  }

  @Test
  void theAdminListenerRefusesRequestsWithoutTheToken() throws IOException {
    server = withAdmin(AdminConfig.builder().tokenFile(tokenFile).build()).build().start();
    assertThat(server.adminPort()).isPositive().isNotEqualTo(server.port());
    String[] bad = {
      "",
      "Authorization: Bearer wrong-token-wrong-token\r\n",
      "Authorization: Basic " + TOKEN + "\r\n",
      "Authorization: Bearer " + TOKEN + "x\r\n",
      "Authorization: Bearer\r\n"
    };
    for (String auth : bad) {
      // a text/plain POST, as a web page could send without a preflight
      Raw.Response r =
          postAdmin(
              auth
                  + "Content-Type: text/plain\r\nContent-Length: 20\r\n\r\n{\"id\":\"evil\",\"x\":1}");
      assertThat(r.status()).as(auth).isEqualTo(401);
      assertThat(r.header("WWW-Authenticate")).isEqualTo("Bearer");
      assertThat(r.body()).contains("Bearer <token>").doesNotContain(TOKEN);
    }
    assertThat(
            registry
                .get("kvroute.edge.refused")
                .tag("listener", "admin")
                .tag("status", "401")
                .counter()
                .count())
        .isEqualTo(bad.length);
    Raw.Response ok =
        postAdmin("Authorization: bearer  " + TOKEN + " \r\nContent-Length: 2\r\n\r\nok");
    assertThat(ok.status()).isEqualTo(201);
    assertThat(ok.body()).isEqualTo("ok");
    // the admin routes are not on the traffic listener
    assertThat(exchange(Raw.connect(server.port()), ADMIN_GET).status()).isEqualTo(404);
  }

  @Test
  void theAdminListenerOverTlsCanRequireClientCertificates() throws IOException {
    AdminConfig admin =
        AdminConfig.builder()
            .tokenEnvironmentVariable("KVROUTE_ADMIN_TOKEN")
            .environment(Map.of("KVROUTE_ADMIN_TOKEN", TOKEN)::get)
            .tls(
                TlsConfig.builder()
                    .certificateChain(certFile)
                    .privateKey(keyFile)
                    .requireClientCertificates(caFile)
                    .build())
            .build();
    server = withAdmin(admin).build().start();
    assertThat(exchange(tlsSocket(server.adminPort(), true), ADMIN_GET).body())
        .isEqualTo("secure=true");
    assertThatThrownBy(() -> exchange(tlsSocket(server.adminPort(), false), ADMIN_GET))
        .isInstanceOf(IOException.class);
  }

  @Test
  void theAdminListenerDoesNotStartWithoutAUsableToken() throws IOException {
    assertThatThrownBy(() -> AdminConfig.builder().host("0.0.0.0").build())
        .isInstanceOf(EdgeConfigException.class)
        .hasMessageContaining("needs a bearer token")
        .hasMessageContaining("admin.tokenFile");
    EdgeServer unset =
        withAdmin(
                AdminConfig.builder()
                    .tokenEnvironmentVariable("KVROUTE_ADMIN_TOKEN")
                    .environment(name -> null)
                    .build())
            .build();
    assertThatThrownBy(unset::start)
        .isInstanceOf(EdgeConfigException.class)
        .hasMessageContaining("$KVROUTE_ADMIN_TOKEN gives no token");
    Path shortToken = dir.resolve("short.token");
    Files.writeString(shortToken, "secret");
    EdgeServer weak = withAdmin(AdminConfig.builder().tokenFile(shortToken).build()).build();
    assertThatThrownBy(weak::start)
        .isInstanceOf(EdgeConfigException.class)
        .hasMessageContaining("shorter than 16 characters");
    EdgeServer missing =
        withAdmin(AdminConfig.builder().tokenFile(dir.resolve("nope.token")).build()).build();
    assertThatThrownBy(missing::start)
        .isInstanceOf(EdgeConfigException.class)
        .hasMessageContaining("nope.token");
    assertThatThrownBy(() -> EdgeServer.builder().adminRoute("GET", "/admin/x", whoami()).build())
        .isInstanceOf(EdgeConfigException.class);
  }

  @Test
  void missingTlsFilesAreNamed() {
    EdgeServer s =
        EdgeServer.builder()
            .tls(
                TlsConfig.builder()
                    .certificateChain(dir.resolve("missing.pem"))
                    .privateKey(keyFile)
                    .build())
            .build();
    assertThatThrownBy(s::start)
        .isInstanceOf(EdgeConfigException.class)
        .hasMessageContaining("listen.tls.certificate")
        .hasMessageContaining("missing.pem");
  }
}
