package io.kvroute.connector;

import java.math.BigDecimal;
import java.time.Duration;
import java.time.format.DateTimeParseException;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * The {@code kvConnector} section of a model's configuration: the connector type, its own
 * parameters, timeouts, retry policy and resource limits. It mirrors the ModelServer resource's
 * {@code kvConnector} spec, so the same YAML loads as written:
 *
 * <pre>{@code
 * kvConnector:
 *   type: "nixl"
 *   config: { ... connector parameters ... }
 *   timeouts: { prefill: "60s", decode: "300s", cleanup: "10s", healthCheck: "5s" }
 *   retry: { maxAttempts: 3, backoffBase: "1s", backoffMax: "10s" }
 *   resources: { maxMemory: "32Gi" }
 * }</pre>
 *
 * <p>Immutable and thread-safe. Durations accept Go/Kubernetes form ({@code "30s"}, {@code
 * "1m30s"}, {@code "250ms"}), ISO-8601 ({@code "PT30S"}) or a number of seconds. Quantities accept
 * Kubernetes suffixes ({@code Ki Mi Gi Ti}, {@code k M G T}) or plain bytes.
 *
 * @param type the connector type, e.g. {@code http}, {@code nixl}
 * @param params connector-specific parameters (the {@code config:} block), as loaded
 * @param timeouts per-operation timeouts
 * @param retry the retry policy over prefill/decode pairs
 * @param resources resource limits (informational for connectors that manage memory)
 */
public record ConnectorConfig(
    String type, Map<String, Object> params, Timeouts timeouts, Retry retry, Resources resources) {

  /** The default connector type. */
  public static final String DEFAULT_TYPE = "http";

  /** Validates and copies. */
  public ConnectorConfig {
    Objects.requireNonNull(type, "type");
    if (type.isBlank()) {
      throw new ConnectorConfigException("kvConnector.type", "must not be blank");
    }
    type = type.toLowerCase(Locale.ROOT);
    params = params == null ? Map.of() : java.util.Collections.unmodifiableMap(deepCopy(params));
    Objects.requireNonNull(timeouts, "timeouts");
    Objects.requireNonNull(retry, "retry");
    Objects.requireNonNull(resources, "resources");
  }

  /** The defaults for {@code type}. */
  public static ConnectorConfig of(String type) {
    return new ConnectorConfig(
        type, Map.of(), Timeouts.DEFAULTS, Retry.DEFAULTS, Resources.UNLIMITED);
  }

  /**
   * Timeouts.
   *
   * @param prefill the whole prefill leg (default 30 s)
   * @param decode the decode leg's response head, and each gap between its chunks (default 120 s)
   * @param cleanup releasing remote state after a failure (default 10 s)
   * @param healthCheck one health probe (default 5 s)
   */
  public record Timeouts(
      Duration prefill, Duration decode, Duration cleanup, Duration healthCheck) {
    /** The defaults. */
    public static final Timeouts DEFAULTS =
        new Timeouts(
            Duration.ofSeconds(30),
            Duration.ofSeconds(120),
            Duration.ofSeconds(10),
            Duration.ofSeconds(5));

    /** Validates: every timeout positive. */
    public Timeouts {
      positive("kvConnector.timeouts.prefill", prefill);
      positive("kvConnector.timeouts.decode", decode);
      positive("kvConnector.timeouts.cleanup", cleanup);
      positive("kvConnector.timeouts.healthCheck", healthCheck);
    }
  }

  /**
   * Retry over prefill/decode pairs.
   *
   * @param maxAttempts attempts in total, first included (default 3)
   * @param backoffBase the first backoff; doubles per retry (default 100 ms)
   * @param backoffMax the cap on one backoff (default 2 s); a longer {@code Retry-After} is capped
   *     too
   */
  public record Retry(int maxAttempts, Duration backoffBase, Duration backoffMax) {
    /** The defaults. */
    public static final Retry DEFAULTS =
        new Retry(3, Duration.ofMillis(100), Duration.ofSeconds(2));

    /** Validates. */
    public Retry {
      if (maxAttempts < 1) {
        throw new ConnectorConfigException(
            "kvConnector.retry.maxAttempts", "must be >= 1, was " + maxAttempts);
      }
      if (maxAttempts > 100) {
        throw new ConnectorConfigException(
            "kvConnector.retry.maxAttempts", "must be <= 100, was " + maxAttempts);
      }
      nonNegative("kvConnector.retry.backoffBase", backoffBase);
      nonNegative("kvConnector.retry.backoffMax", backoffMax);
      if (backoffMax.compareTo(backoffBase) < 0) {
        throw new ConnectorConfigException(
            "kvConnector.retry.backoffMax",
            "must be >= backoffBase (" + backoffBase + "), was " + backoffMax);
      }
    }

    /** The backoff before retry number {@code retry} (1-based), without jitter. */
    public Duration backoff(int retry) {
      if (retry <= 0 || backoffBase.isZero()) {
        return Duration.ZERO;
      }
      long base = backoffBase.toNanos();
      long max = backoffMax.toNanos();
      int shift = Math.min(retry - 1, 30);
      long d = base > (max >> shift) ? max : base << shift;
      return Duration.ofNanos(Math.min(d, max));
    }
  }

  /**
   * Resource limits in bytes (bytes per second for bandwidth); empty when not set.
   *
   * @param maxMemory memory for KV cache
   * @param maxDisk disk for KV cache
   * @param maxBandwidth network bandwidth
   */
  public record Resources(
      Optional<Long> maxMemory, Optional<Long> maxDisk, Optional<Long> maxBandwidth) {
    /** No limits. */
    public static final Resources UNLIMITED =
        new Resources(Optional.empty(), Optional.empty(), Optional.empty());

    /** Validates. */
    public Resources {
      Objects.requireNonNull(maxMemory, "maxMemory");
      Objects.requireNonNull(maxDisk, "maxDisk");
      Objects.requireNonNull(maxBandwidth, "maxBandwidth");
    }
  }

  /** A string parameter of the {@code config:} block, or empty. */
  public Optional<String> param(String name) {
    Object v = params.get(name);
    return v == null ? Optional.empty() : Optional.of(String.valueOf(v));
  }

  /** A boolean parameter, or {@code defaultValue}; accepts true/false and "true"/"false". */
  public boolean booleanParam(String name, boolean defaultValue) {
    Object v = params.get(name);
    if (v == null) {
      return defaultValue;
    }
    if (v instanceof Boolean) {
      return (Boolean) v;
    }
    String s = String.valueOf(v).trim().toLowerCase(Locale.ROOT);
    if (s.equals("true")) {
      return true;
    }
    if (s.equals("false")) {
      return false;
    }
    throw new ConnectorConfigException(
        "kvConnector.config." + name, "must be true or false, was " + describe(v));
  }

  /** A duration parameter, or {@code defaultValue}. */
  public Duration durationParam(String name, Duration defaultValue) {
    return duration("kvConnector.config." + name, params.get(name), defaultValue);
  }

  /** An integer parameter, or {@code defaultValue}. */
  public int intParam(String name, int defaultValue) {
    return integer("kvConnector.config." + name, params.get(name), defaultValue);
  }

  /** A copy with other connector parameters. */
  public ConnectorConfig withParams(Map<String, ?> newParams) {
    Map<String, Object> p = new LinkedHashMap<>();
    if (newParams != null) {
      p.putAll(newParams);
    }
    return new ConnectorConfig(type, p, timeouts, retry, resources);
  }

  /** A copy with another type. */
  public ConnectorConfig withType(String newType) {
    return new ConnectorConfig(newType, params, timeouts, retry, resources);
  }

  /** A copy with other timeouts. */
  public ConnectorConfig withTimeouts(Timeouts newTimeouts) {
    return new ConnectorConfig(type, params, newTimeouts, retry, resources);
  }

  /** A copy with another retry policy. */
  public ConnectorConfig withRetry(Retry newRetry) {
    return new ConnectorConfig(type, params, timeouts, newRetry, resources);
  }

  // ---- parsing helpers -------------------------------------------------------------------

  /**
   * Parses a duration: Go form ({@code 1h2m3.5s}, {@code 250ms}, {@code 10us}, {@code 5ns}),
   * ISO-8601 ({@code PT30S}) or a plain number of seconds.
   *
   * @throws ConnectorConfigException naming {@code field}
   */
  public static Duration parseDuration(String field, Object value) {
    if (value instanceof Duration) {
      return (Duration) value;
    }
    if (value instanceof Number) {
      return seconds(field, new BigDecimal(value.toString()));
    }
    if (!(value instanceof String)) {
      throw new ConnectorConfigException(
          field, "must be a duration such as \"30s\", was " + describe(value));
    }
    String s = ((String) value).trim();
    if (s.isEmpty()) {
      throw new ConnectorConfigException(field, "must be a duration such as \"30s\", was \"\"");
    }
    if (s.startsWith("P") || s.startsWith("p")) {
      try {
        return Duration.parse(s.toUpperCase(Locale.ROOT));
      } catch (DateTimeParseException e) {
        throw new ConnectorConfigException(
            field, "is not a valid ISO-8601 duration: \"" + s + "\"");
      }
    }
    if (s.chars().allMatch(c -> (c >= '0' && c <= '9') || c == '.')) {
      try {
        return seconds(field, new BigDecimal(s));
      } catch (NumberFormatException e) {
        throw new ConnectorConfigException(field, "is not a valid duration: \"" + s + "\"");
      }
    }
    boolean negative = s.startsWith("-");
    int i = negative || s.startsWith("+") ? 1 : 0;
    BigDecimal totalNanos = BigDecimal.ZERO;
    boolean any = false;
    while (i < s.length()) {
      int start = i;
      while (i < s.length() && (Character.isDigit(s.charAt(i)) || s.charAt(i) == '.')) {
        i++;
      }
      if (start == i) {
        throw new ConnectorConfigException(field, "is not a valid duration: \"" + s + "\"");
      }
      BigDecimal number;
      try {
        number = new BigDecimal(s.substring(start, i));
      } catch (NumberFormatException e) {
        throw new ConnectorConfigException(field, "is not a valid duration: \"" + s + "\"");
      }
      int unitStart = i;
      while (i < s.length() && Character.isLetter(s.charAt(i))) {
        i++;
      }
      String unit = s.substring(unitStart, i);
      long nanosPerUnit;
      switch (unit) {
        case "ns":
          nanosPerUnit = 1L;
          break;
        case "us":
        case "µs":
          nanosPerUnit = 1_000L;
          break;
        case "ms":
          nanosPerUnit = 1_000_000L;
          break;
        case "s":
          nanosPerUnit = 1_000_000_000L;
          break;
        case "m":
          nanosPerUnit = 60_000_000_000L;
          break;
        case "h":
          nanosPerUnit = 3_600_000_000_000L;
          break;
        default:
          throw new ConnectorConfigException(
              field,
              "has unknown unit \""
                  + unit
                  + "\" in \""
                  + s
                  + "\"; use ns, us, ms, s, m or h (e.g. \"30s\", \"1m30s\")");
      }
      totalNanos = totalNanos.add(number.multiply(BigDecimal.valueOf(nanosPerUnit)));
      any = true;
    }
    if (!any) {
      throw new ConnectorConfigException(field, "is not a valid duration: \"" + s + "\"");
    }
    Duration d = Duration.ofNanos(totalNanos.longValue());
    return negative ? d.negated() : d;
  }

  private static Duration seconds(String field, BigDecimal secs) {
    try {
      return Duration.ofNanos(secs.multiply(BigDecimal.valueOf(1_000_000_000L)).longValueExact());
    } catch (ArithmeticException e) {
      throw new ConnectorConfigException(field, "is out of range: " + secs);
    }
  }

  /**
   * Parses a Kubernetes quantity into bytes: {@code 32Gi}, {@code 500M}, {@code 1048576}.
   *
   * @throws ConnectorConfigException naming {@code field}
   */
  public static long parseQuantity(String field, Object value) {
    if (value instanceof Number) {
      long v = ((Number) value).longValue();
      if (v < 0) {
        throw new ConnectorConfigException(field, "must be >= 0, was " + v);
      }
      return v;
    }
    if (!(value instanceof String)) {
      throw new ConnectorConfigException(
          field, "must be a quantity such as \"32Gi\", was " + describe(value));
    }
    String s = ((String) value).trim();
    String[] suffixes = {"Ki", "Mi", "Gi", "Ti", "Pi", "k", "K", "M", "G", "T", "P"};
    long[] factors = {
      1L << 10,
      1L << 20,
      1L << 30,
      1L << 40,
      1L << 50,
      1_000L,
      1_000L,
      1_000_000L,
      1_000_000_000L,
      1_000_000_000_000L,
      1_000_000_000_000_000L
    };
    long factor = 1;
    String number = s;
    for (int i = 0; i < suffixes.length; i++) {
      if (s.endsWith(suffixes[i])) {
        factor = factors[i];
        number = s.substring(0, s.length() - suffixes[i].length());
        break;
      }
    }
    try {
      BigDecimal bytes = new BigDecimal(number.trim()).multiply(BigDecimal.valueOf(factor));
      if (bytes.signum() < 0) {
        throw new ConnectorConfigException(field, "must be >= 0, was \"" + s + "\"");
      }
      return bytes.longValue();
    } catch (NumberFormatException e) {
      throw new ConnectorConfigException(
          field, "is not a valid quantity (e.g. \"32Gi\", \"500M\"): \"" + s + "\"");
    }
  }

  private static Duration duration(String field, Object value, Duration dflt) {
    return value == null ? dflt : parseDuration(field, value);
  }

  private static int integer(String field, Object value, int dflt) {
    if (value == null) {
      return dflt;
    }
    if (value instanceof Integer || value instanceof Long || value instanceof Short) {
      long v = ((Number) value).longValue();
      if (v > Integer.MAX_VALUE || v < Integer.MIN_VALUE) {
        throw new ConnectorConfigException(field, "is out of range: " + v);
      }
      return (int) v;
    }
    if (value instanceof String) {
      try {
        return Integer.parseInt(((String) value).trim());
      } catch (NumberFormatException e) {
        // fall through to the error below
      }
    }
    throw new ConnectorConfigException(field, "must be an integer, was " + describe(value));
  }

  private static void positive(String field, Duration d) {
    if (d == null) {
      throw new ConnectorConfigException(field, "must be set");
    }
    if (d.isNegative() || d.isZero()) {
      throw new ConnectorConfigException(field, "must be > 0, was " + d);
    }
  }

  private static void nonNegative(String field, Duration d) {
    if (d == null) {
      throw new ConnectorConfigException(field, "must be set");
    }
    if (d.isNegative()) {
      throw new ConnectorConfigException(field, "must be >= 0, was " + d);
    }
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> deepCopy(Map<String, ?> m) {
    Map<String, Object> copy = new LinkedHashMap<>();
    m.forEach((k, v) -> copy.put(k, v));
    return copy;
  }

  private static String describe(Object v) {
    if (v == null) {
      return "null";
    }
    if (v instanceof String) {
      return "\"" + v + "\"";
    }
    return v + " (" + v.getClass().getSimpleName() + ")";
  }
}
