package io.kvroute.edge.internal;

import io.kvroute.edge.EdgeConfigException;
import io.kvroute.edge.TlsConfig;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslProvider;
import java.nio.file.Files;
import java.nio.file.Path;

/** Builds a server {@link SslContext} from a {@link TlsConfig}. Stateless. */
final class Tls {
  private Tls() {}

  static SslContext serverContext(TlsConfig tls, String listener) {
    check(tls.certificateChain(), listener + ".tls.certificate");
    check(tls.privateKey(), listener + ".tls.key");
    try {
      SslContextBuilder b =
          SslContextBuilder.forServer(
                  tls.certificateChain().toFile(),
                  tls.privateKey().toFile(),
                  tls.keyPassword().orElse(null))
              .sslProvider(SslProvider.JDK)
              .protocols("TLSv1.3", "TLSv1.2");
      if (tls.clientAuth() == TlsConfig.ClientAuth.REQUIRE) {
        Path trusted = tls.trustedClientCertificates().orElseThrow();
        check(trusted, listener + ".tls.clientCertificates");
        b.trustManager(trusted.toFile()).clientAuth(ClientAuth.REQUIRE);
      }
      return b.build();
    } catch (Exception e) {
      throw new EdgeConfigException(
          listener
              + ".tls: cannot use certificate "
              + tls.certificateChain()
              + " with key "
              + tls.privateKey()
              + ": "
              + e.getMessage(),
          e);
    }
  }

  private static void check(Path p, String field) {
    if (!Files.isReadable(p)) {
      throw new EdgeConfigException(field + ": cannot read " + p);
    }
  }
}
