package io.kvroute.edge;

import java.nio.file.Path;
import java.util.Objects;
import java.util.Optional;

/**
 * TLS for a listener: a PEM certificate chain and its PEM (PKCS#8) private key, and optionally the
 * PEM certificates of the authorities whose client certificates are accepted. Immutable; built by
 * {@link #builder()}. The files are read when the server starts; a missing or unreadable file fails
 * the start with an {@link EdgeConfigException} naming it.
 */
public final class TlsConfig {
  /** Whether clients must present a certificate. */
  public enum ClientAuth {
    /** No client certificate is asked for. */
    NONE,
    /** A client certificate signed by a trusted authority is required. */
    REQUIRE
  }

  private final Path certificateChain;
  private final Path privateKey;
  private final String keyPassword;
  private final ClientAuth clientAuth;
  private final Path trustedClientCertificates;

  private TlsConfig(Builder b) {
    this.certificateChain = b.certificateChain;
    this.privateKey = b.privateKey;
    this.keyPassword = b.keyPassword;
    this.clientAuth = b.clientAuth;
    this.trustedClientCertificates = b.trustedClientCertificates;
  }

  /** A builder. */
  public static Builder builder() {
    return new Builder();
  }

  /** The PEM certificate chain, the server's certificate first. */
  public Path certificateChain() {
    return certificateChain;
  }

  /** The PEM (PKCS#8) private key. */
  public Path privateKey() {
    return privateKey;
  }

  /** The private key's password, if it is encrypted. */
  public Optional<String> keyPassword() {
    return Optional.ofNullable(keyPassword);
  }

  /** Whether clients must present a certificate. */
  public ClientAuth clientAuth() {
    return clientAuth;
  }

  /** PEM certificates of the authorities trusted to sign client certificates. */
  public Optional<Path> trustedClientCertificates() {
    return Optional.ofNullable(trustedClientCertificates);
  }

  @Override
  public String toString() {
    // no key password
    return "TlsConfig{certificateChain="
        + certificateChain
        + ", privateKey="
        + privateKey
        + ", clientAuth="
        + clientAuth
        + (trustedClientCertificates == null ? "" : ", trusted=" + trustedClientCertificates)
        + "}";
  }

  /** Builds a {@link TlsConfig}. */
  public static final class Builder {
    private Path certificateChain;
    private Path privateKey;
    private String keyPassword;
    private ClientAuth clientAuth = ClientAuth.NONE;
    private Path trustedClientCertificates;

    private Builder() {}

    /**
     * The PEM certificate chain, the server's certificate first.
     *
     * @param file a PEM file
     * @return this builder
     */
    public Builder certificateChain(Path file) {
      this.certificateChain = Objects.requireNonNull(file, "certificateChain");
      return this;
    }

    /**
     * The PEM (PKCS#8) private key.
     *
     * @param file a PEM file
     * @return this builder
     */
    public Builder privateKey(Path file) {
      this.privateKey = Objects.requireNonNull(file, "privateKey");
      return this;
    }

    /**
     * The private key's password, if it is encrypted.
     *
     * @param password the password
     * @return this builder
     */
    public Builder keyPassword(String password) {
      this.keyPassword = password;
      return this;
    }

    /**
     * Requires client certificates signed by one of the authorities in {@code file}.
     *
     * @param file PEM certificates of the trusted authorities
     * @return this builder
     */
    public Builder requireClientCertificates(Path file) {
      this.clientAuth = ClientAuth.REQUIRE;
      this.trustedClientCertificates = Objects.requireNonNull(file, "trustedClientCertificates");
      return this;
    }

    /**
     * Validates and builds.
     *
     * @return the configuration
     * @throws EdgeConfigException if the certificate or the key is missing
     */
    public TlsConfig build() {
      if (certificateChain == null || privateKey == null) {
        throw new EdgeConfigException(
            "tls needs both certificateChain and privateKey (PEM files); got "
                + (certificateChain == null ? "no certificateChain" : "no privateKey"));
      }
      return new TlsConfig(this);
    }
  }
}
