package io.kvroute.edge;

import java.nio.file.Path;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Function;

/**
 * The admin listener: its own address (loopback by default), optional TLS (with optional client
 * certificates), and the bearer token every request must carry, read from a file or an environment
 * variable when the server starts. There is no admin listener unless one is configured, and none
 * without a token: a request without {@code Authorization: Bearer <token>} is answered 401.
 * Immutable; built by {@link #builder()}.
 */
public final class AdminConfig {
  /** The shortest token accepted. */
  public static final int MIN_TOKEN_LENGTH = 16;

  private final String host;
  private final int port;
  private final TlsConfig tls;
  private final Path tokenFile;
  private final String tokenEnvironmentVariable;
  private final Function<String, String> environment;

  private AdminConfig(Builder b) {
    this.host = b.host;
    this.port = b.port;
    this.tls = b.tls;
    this.tokenFile = b.tokenFile;
    this.tokenEnvironmentVariable = b.tokenEnvironmentVariable;
    this.environment = b.environment;
  }

  /** A builder. */
  public static Builder builder() {
    return new Builder();
  }

  /** The address to listen on. */
  public String host() {
    return host;
  }

  /** The port to listen on (0: any free port). */
  public int port() {
    return port;
  }

  /** TLS of the admin listener, if any. */
  public Optional<TlsConfig> tls() {
    return Optional.ofNullable(tls);
  }

  /** The file holding the token, if the token comes from a file. */
  public Optional<Path> tokenFile() {
    return Optional.ofNullable(tokenFile);
  }

  /** The environment variable holding the token, if the token comes from one. */
  public Optional<String> tokenEnvironmentVariable() {
    return Optional.ofNullable(tokenEnvironmentVariable);
  }

  /** How environment variables are read (the process environment unless a test injects one). */
  public Function<String, String> environment() {
    return environment;
  }

  @Override
  public String toString() {
    return "AdminConfig{host="
        + host
        + ", port="
        + port
        + ", tls="
        + (tls != null)
        + ", token="
        + (tokenFile != null ? "file " + tokenFile : "env " + tokenEnvironmentVariable)
        + "}";
  }

  /** Builds an {@link AdminConfig}. */
  public static final class Builder {
    private String host = "127.0.0.1";
    private int port;
    private TlsConfig tls;
    private Path tokenFile;
    private String tokenEnvironmentVariable;
    private Function<String, String> environment = System::getenv;

    private Builder() {}

    /**
     * The address to listen on; loopback ({@code 127.0.0.1}) unless set.
     *
     * @param host a host name or address
     * @return this builder
     */
    public Builder host(String host) {
      this.host = Objects.requireNonNull(host, "host");
      return this;
    }

    /**
     * The port to listen on.
     *
     * @param port 0 (any free port) to 65535
     * @return this builder
     */
    public Builder port(int port) {
      this.port = port;
      return this;
    }

    /**
     * Serves the admin listener over TLS.
     *
     * @param tls certificate, key and optional client-certificate authorities
     * @return this builder
     */
    public Builder tls(TlsConfig tls) {
      this.tls = tls;
      return this;
    }

    /**
     * Reads the token from a file (its content, without surrounding whitespace).
     *
     * @param file the token file; keep it readable by the server's user only
     * @return this builder
     */
    public Builder tokenFile(Path file) {
      this.tokenFile = Objects.requireNonNull(file, "tokenFile");
      return this;
    }

    /**
     * Reads the token from an environment variable.
     *
     * @param name the variable, e.g. {@code KVROUTE_ADMIN_TOKEN}
     * @return this builder
     */
    public Builder tokenEnvironmentVariable(String name) {
      this.tokenEnvironmentVariable = Objects.requireNonNull(name, "tokenEnvironmentVariable");
      return this;
    }

    /**
     * How environment variables are read; the process environment by default (tests inject one).
     *
     * @param environment name to value, {@code null} when unset
     * @return this builder
     */
    public Builder environment(Function<String, String> environment) {
      this.environment = Objects.requireNonNull(environment, "environment");
      return this;
    }

    /**
     * Validates and builds.
     *
     * @return the configuration
     * @throws EdgeConfigException if no token source, or both, are given, or the port is out of
     *     range
     */
    public AdminConfig build() {
      if (port < 0 || port > 65535) {
        throw new EdgeConfigException("admin.port must be between 0 and 65535, was " + port);
      }
      if (tokenFile == null && tokenEnvironmentVariable == null) {
        throw new EdgeConfigException(
            "admin listener on "
                + host
                + " needs a bearer token: set admin.tokenFile (a file readable only by the"
                + " server's user) or admin.tokenEnv (an environment variable)");
      }
      if (tokenFile != null && tokenEnvironmentVariable != null) {
        throw new EdgeConfigException("set only one of admin.tokenFile and admin.tokenEnv");
      }
      return new AdminConfig(this);
    }
  }
}
