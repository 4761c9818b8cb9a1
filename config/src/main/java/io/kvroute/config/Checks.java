package io.kvroute.config;

import java.net.URI;
import java.net.URISyntaxException;
import java.util.Locale;
import java.util.regex.Pattern;

/**
 * Checks that bound records share, each throwing a {@link ConfigException} at the path it is given
 * with the message kvroute uses everywhere ({@code endpoints[1].url: not an http(s) URL:
 * "http//x"}).
 */
public final class Checks {
  private static final Pattern TCP =
      Pattern.compile("tcp://(\\*|[^:/\\s]+|\\[[0-9A-Fa-f:.]+]):\\d{1,5}");

  private Checks() {}

  /**
   * An absolute {@code http} or {@code https} URL with a host.
   *
   * @throws ConfigException at {@code path} otherwise
   */
  public static URI httpUrl(String path, String value) {
    if (value == null) {
      throw new ConfigException(path, "is required (an http(s) URL)");
    }
    try {
      URI u = new URI(value.trim());
      String scheme = u.getScheme() == null ? "" : u.getScheme().toLowerCase(Locale.ROOT);
      if ((scheme.equals("http") || scheme.equals("https")) && u.getHost() != null) {
        return u;
      }
    } catch (URISyntaxException e) {
      // reported below
    }
    throw new ConfigException(path, "not an http(s) URL: \"" + value + "\"");
  }

  /**
   * A ZeroMQ endpoint a KV-event publisher can be reached at: {@code tcp://host:port}, {@code
   * ipc://path} or {@code inproc://name}.
   *
   * @throws ConfigException at {@code path} otherwise
   */
  public static String zmqEndpoint(String path, String value) {
    if (value == null) {
      throw new ConfigException(path, "is required (a tcp:// or ipc:// endpoint)");
    }
    boolean ok =
        TCP.matcher(value).matches()
            || (value.startsWith("ipc://") && value.length() > "ipc://".length())
            || (value.startsWith("inproc://") && value.length() > "inproc://".length());
    if (!ok) {
      throw new ConfigException(
          path,
          "must be a tcp:// or ipc:// endpoint such as \"tcp://10.0.0.5:5557\", was \""
              + value
              + "\"");
    }
    return value;
  }

  /**
   * A value in {@code [min, max]}.
   *
   * @throws ConfigException at {@code path} otherwise
   */
  public static long range(String path, long value, long min, long max) {
    if (value < min || value > max) {
      throw new ConfigException(
          path,
          max == Long.MAX_VALUE || max == Integer.MAX_VALUE
              ? "must be >= " + min + ", was " + value
              : "must be in [" + min + ", " + max + "], was " + value);
    }
    return value;
  }

  /**
   * A non-null value.
   *
   * @param what what it should be, for the message (e.g. {@code "the served model's name"})
   * @throws ConfigException at {@code path} when it is null
   */
  public static <T> T required(String path, T value, String what) {
    if (value == null || (value instanceof String s && s.isBlank())) {
      throw new ConfigException(path, "is required (" + what + ")");
    }
    return value;
  }
}
