package io.kvroute.cli;

import io.kvroute.config.Checks;
import io.kvroute.config.ConfigException;
import io.kvroute.edge.AdminConfig;
import io.kvroute.edge.EdgeConfigException;
import io.kvroute.edge.EdgeLimits;
import io.kvroute.edge.TlsConfig;
import java.nio.file.Path;
import java.time.Duration;

/**
 * The listener sections that {@code gateway} and {@code proxy} share: {@code listen} (address,
 * limits, timeouts, TLS) and {@code admin} (the token-protected admin listener). Bound strictly by
 * the configuration binder; {@code proxy} fills {@link Listen} from {@code --listen KEY=VALUE}.
 */
final class FrontConfig {
  private FrontConfig() {}

  /**
   * {@code listen}: the traffic listener. Every limit has a safe default (see {@code
   * docs/http-edge.md}); a refusal is answered with a status line and a JSON body.
   *
   * @param host the address to bind (default 127.0.0.1)
   * @param port the port (default 8080 for the gateway, 8000 for the proxy; 0: any free port)
   * @param maxConnections open connections beyond which new ones are answered 503 (default 16384)
   * @param maxHeaderBytes request line and headers, in bytes (default 16384; 431 beyond)
   * @param maxHeaderCount header lines (default 100; 431 beyond)
   * @param maxBodyBytes request body, checked from {@code Content-Length} before reading and while
   *     reading chunked bodies (default 16 MiB; 413 beyond)
   * @param headerTimeout time to receive the request line and headers (default 10s; 408)
   * @param bodyTimeout time to receive the body once the headers are in (default 30s; 408)
   * @param idleTimeout how long a keep-alive connection may wait between requests (default 60s)
   * @param writeTimeout how long an answer may stall because the client does not read (default 60s)
   * @param tls serve HTTPS (default: plain HTTP)
   */
  record Listen(
      String host,
      Integer port,
      Integer maxConnections,
      Integer maxHeaderBytes,
      Integer maxHeaderCount,
      Integer maxBodyBytes,
      Duration headerTimeout,
      Duration bodyTimeout,
      Duration idleTimeout,
      Duration writeTimeout,
      Tls tls) {
    Listen {
      host = host == null ? "127.0.0.1" : host;
      if (host.isBlank()) {
        throw new ConfigException("host", "must not be blank");
      }
      if (port != null) {
        Checks.range("port", port, 0, 65535);
      }
      // The edge's ranges, checked here so that a mistake names its key (listen.maxHeaderBytes).
      range("maxConnections", maxConnections, 1, EdgeLimits.MAX_CONNECTIONS_LIMIT);
      range(
          "maxHeaderBytes",
          maxHeaderBytes,
          EdgeLimits.MIN_HEADER_BYTES,
          EdgeLimits.MAX_HEADER_BYTES_LIMIT);
      range("maxHeaderCount", maxHeaderCount, 1, EdgeLimits.MAX_HEADER_COUNT_LIMIT);
      range("maxBodyBytes", maxBodyBytes, 1, EdgeLimits.MAX_BODY_BYTES_LIMIT);
      positive("headerTimeout", headerTimeout);
      positive("bodyTimeout", bodyTimeout);
      positive("idleTimeout", idleTimeout);
      positive("writeTimeout", writeTimeout);
    }

    /** The defaults: loopback, the given port. */
    static Listen loopback(int port) {
      return new Listen(null, port, null, null, null, null, null, null, null, null, null);
    }

    /** This section with {@code port} when it sets none. */
    Listen withDefaultPort(int defaultPort) {
      return port != null
          ? this
          : new Listen(
              host,
              defaultPort,
              maxConnections,
              maxHeaderBytes,
              maxHeaderCount,
              maxBodyBytes,
              headerTimeout,
              bodyTimeout,
              idleTimeout,
              writeTimeout,
              tls);
    }

    /** The port, or {@code fallback} when none is set. */
    int portOr(int fallback) {
      return port == null ? fallback : port;
    }

    /** The edge limits these keys describe (defaults for the keys not set). */
    EdgeLimits limits() {
      EdgeLimits.Builder b = EdgeLimits.defaults().toBuilder();
      if (maxConnections != null) {
        b.maxConnections(maxConnections);
      }
      if (maxHeaderBytes != null) {
        b.maxHeaderBytes(maxHeaderBytes);
      }
      if (maxHeaderCount != null) {
        b.maxHeaderCount(maxHeaderCount);
      }
      if (maxBodyBytes != null) {
        b.maxBodyBytes(maxBodyBytes);
      }
      if (headerTimeout != null) {
        b.headerTimeout(headerTimeout);
      }
      if (bodyTimeout != null) {
        b.bodyTimeout(bodyTimeout);
      }
      if (idleTimeout != null) {
        b.idleTimeout(idleTimeout);
      }
      if (writeTimeout != null) {
        b.writeTimeout(writeTimeout);
      }
      try {
        return b.build();
      } catch (EdgeConfigException e) {
        throw new ConfigException("", e.getMessage(), e);
      }
    }
  }

  /**
   * {@code tls}: serve HTTPS.
   *
   * @param certificate the PEM certificate chain file (relative to the configuration file)
   * @param key the PEM private key file (PKCS#8)
   * @param keyPassword the key's password, if it is encrypted
   * @param clientCertificates PEM CA certificates; when set, clients must present a certificate
   *     they signed (mutual TLS)
   */
  record Tls(String certificate, String key, String keyPassword, String clientCertificates) {
    Tls {
      Checks.required("certificate", certificate, "the PEM certificate chain file");
      Checks.required("key", key, "the PEM private key file");
    }

    /**
     * The edge's TLS settings, files resolved against {@code dir}.
     *
     * @throws ConfigException naming the key ({@code certificate}, {@code key}, {@code
     *     clientCertificates}) of a file that cannot be read
     */
    TlsConfig toEdge(Path dir) {
      TlsConfig.Builder b =
          TlsConfig.builder()
              .certificateChain(readable("certificate", GatewayConfig.resolve(certificate, dir)))
              .privateKey(readable("key", GatewayConfig.resolve(key, dir)));
      if (keyPassword != null) {
        b.keyPassword(keyPassword);
      }
      if (clientCertificates != null) {
        b.requireClientCertificates(
            readable("clientCertificates", GatewayConfig.resolve(clientCertificates, dir)));
      }
      return b.build();
    }

    private static Path readable(String key, Path file) {
      if (!java.nio.file.Files.isReadable(file)) {
        throw new ConfigException(
            key, (java.nio.file.Files.exists(file) ? "cannot read " : "no such file: ") + file);
      }
      return file;
    }
  }

  /**
   * {@code admin}: the admin listener (off unless this section is given). Every request needs
   * {@code Authorization: Bearer <token>}; the token comes from {@code tokenFile} or else the
   * environment variable {@code tokenEnv} ({@code KVROUTE_ADMIN_TOKEN} by default) and has 16 or
   * more characters; without one the server does not start.
   *
   * @param host the address to bind (default 127.0.0.1; another address is logged as a warning)
   * @param port the port (default 8081; 0: any free port)
   * @param tokenFile the file holding the bearer token (relative to the configuration file)
   * @param tokenEnv the environment variable holding it (default {@code KVROUTE_ADMIN_TOKEN})
   * @param tls serve the admin API over HTTPS, optionally with client certificates
   */
  record Admin(String host, Integer port, String tokenFile, String tokenEnv, Tls tls) {
    /** Where the admin token comes from when neither key is set. */
    static final String DEFAULT_TOKEN_ENV = "KVROUTE_ADMIN_TOKEN";

    Admin {
      host = host == null ? "127.0.0.1" : host;
      port = port == null ? 8081 : port;
      Checks.range("port", port, 0, 65535);
      if (tokenFile != null && tokenEnv != null) {
        throw new ConfigException("tokenEnv", "set only one of tokenFile and tokenEnv");
      }
      if (tokenFile == null && tokenEnv == null) {
        tokenEnv = DEFAULT_TOKEN_ENV;
      }
    }

    /** The admin listener on loopback. */
    static Admin loopback(int port, Path tokenFile) {
      return new Admin(null, port, tokenFile == null ? null : tokenFile.toString(), null, null);
    }

    /** The edge's admin settings, files resolved against {@code dir}. */
    AdminConfig toEdge(Path dir) {
      AdminConfig.Builder b = AdminConfig.builder().host(host).port(port);
      if (tokenFile != null) {
        b.tokenFile(GatewayConfig.resolve(tokenFile, dir));
      } else {
        b.tokenEnvironmentVariable(tokenEnv);
      }
      if (tls != null) {
        try {
          b.tls(tls.toEdge(dir));
        } catch (ConfigException e) {
          throw e.under("tls");
        }
      }
      return b.build();
    }
  }

  private static void range(String path, Integer v, int min, int max) {
    if (v != null) {
      Checks.range(path, v, min, max);
    }
  }

  private static void positive(String path, Duration v) {
    if (v != null && (v.isNegative() || v.isZero())) {
      throw new ConfigException(path, "must be > 0, was " + v);
    }
  }
}
