package io.kvroute.replay;

import java.util.Locale;
import java.util.Objects;

/**
 * A class of requests in a replay: the requests of a workload given this name, priority, tenant and
 * objective (by {@link Workload#withClasses}, or by a trace's own annotations). The report gives
 * each class its own figures ({@link StrategyResult#classes()}), and with flow control on ({@link
 * Replay.Builder#flowControl}) the priority picks the request's band and the tenant its fair share.
 *
 * @param name the class's name in reports
 * @param share its weight when a generator assigns classes ({@link Workload#withClasses}); the
 *     weights of a list need not sum to 1
 * @param priority its priority (higher is more important; flow control's bands)
 * @param tenant who sends it (flow control's fairness is between tenants)
 * @param slo its objective, or null for the replay's ({@link Replay.Builder#slo})
 */
public record RequestClass(String name, double share, int priority, String tenant, Slo slo) {
  /** Validates. */
  public RequestClass {
    if (name == null || name.isBlank()) {
      throw new IllegalArgumentException("class name must not be blank");
    }
    if (!(share > 0) || Double.isInfinite(share)) {
      throw new IllegalArgumentException("class " + name + ": share must be > 0, was " + share);
    }
    Objects.requireNonNull(tenant, "tenant");
    if (tenant.isBlank()) {
      throw new IllegalArgumentException("class " + name + ": tenant must not be blank");
    }
  }

  /**
   * Parses {@code name:share=9,priority=-100,tenant=b,ttft=2s,tpot=50ms}: every key is optional
   * (share 1, priority 0, the tenant named as the class, the replay's SLO); {@code ttft} and {@code
   * tpot} given alone take the other from {@link Slo#DEFAULT}.
   *
   * @throws IllegalArgumentException naming the part that does not parse
   */
  public static RequestClass parse(String text) {
    Objects.requireNonNull(text, "text");
    int colon = text.indexOf(':');
    String name = (colon < 0 ? text : text.substring(0, colon)).trim();
    double share = 1;
    int priority = 0;
    String tenant = name;
    StringBuilder slo = new StringBuilder();
    if (colon >= 0) {
      for (String part : text.substring(colon + 1).split(",")) {
        String p = part.trim();
        if (p.isEmpty()) {
          continue;
        }
        int eq = p.indexOf('=');
        if (eq < 0) {
          throw new IllegalArgumentException(
              "class " + name + ": expected key=value, got \"" + p + "\"");
        }
        String key = p.substring(0, eq).trim().toLowerCase(Locale.ROOT);
        String value = p.substring(eq + 1).trim();
        try {
          switch (key) {
            case "share":
              share = Double.parseDouble(value);
              break;
            case "priority":
              priority = Integer.parseInt(value);
              break;
            case "tenant":
              tenant = value;
              break;
            case "ttft":
            case "tpot":
              slo.append(slo.length() == 0 ? "" : ",").append(key).append('=').append(value);
              break;
            default:
              throw new IllegalArgumentException(
                  "class "
                      + name
                      + ": unknown key \""
                      + key
                      + "\"; known: share, priority, tenant, ttft, tpot");
          }
        } catch (NumberFormatException e) {
          throw new IllegalArgumentException(
              "class " + name + ": " + key + " must be a number, got \"" + value + "\"", e);
        }
      }
    }
    return new RequestClass(
        name, share, priority, tenant, slo.length() == 0 ? null : Slo.parse(slo.toString()));
  }
}
