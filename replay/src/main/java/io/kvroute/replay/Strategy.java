package io.kvroute.replay;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * A routing strategy a replay compares. Every one runs through kvroute's {@code Scheduler}; they
 * differ in profiles and in what the prefix scorer reads.
 */
public enum Strategy {
  /** A uniformly random endpoint. */
  RANDOM("random", "uniformly random endpoint"),
  /** Endpoints in turn. */
  ROUND_ROBIN("round-robin", "endpoints in turn"),
  /** Least loaded: engine queue, KV-cache usage and the router's in-flight count. */
  LEAST_LOAD("least-load", "engine queue + KV usage + in-flight requests"),
  /** kvroute's default profiles on the router's own LRU of what it sent where (no KV events). */
  APPROXIMATE("approximate", "default profiles, approximate prefix index (no KV events)"),
  /** kvroute's default profiles on the KV-event-fed {@code BlockIndex} (with the event lag). */
  PRECISE("precise", "default profiles, BlockIndex fed by the engines' KV events"),
  /** The default profiles reading the engines' true cache state, without lag: an upper bound. */
  ORACLE("oracle", "default profiles on the engines' true cache state (no lag)"),
  /**
   * {@link #PRECISE}'s profiles plus the {@code predicted-latency-scorer} (the scheduler's {@code
   * LatencyPredictor}, learned online from the replay's observed latencies) at {@link
   * Replay.Builder#latencyWeight}; the scorer aims at each request's objective unless {@link
   * Replay.Builder#latencyObjective} is off. Not in the default set: a candidate for the default
   * profiles, measured against {@link #PRECISE} (docs/routing-quality.md).
   */
  PRECISE_LATENCY(
      "precise-latency", "precise's profiles plus the predicted-latency scorer (KV-event index)");

  /**
   * The strategies a replay compares unless told otherwise: every one but {@link #PRECISE_LATENCY},
   * in declaration order.
   */
  public static final List<Strategy> DEFAULTS =
      List.of(RANDOM, ROUND_ROBIN, LEAST_LOAD, APPROXIMATE, PRECISE, ORACLE);

  private final String cliName;
  private final String description;

  Strategy(String cliName, String description) {
    this.cliName = cliName;
    this.description = description;
  }

  /** The name on the command line and in reports. */
  public String cliName() {
    return cliName;
  }

  /** One line saying what it does. */
  public String description() {
    return description;
  }

  /**
   * Parses a comma-separated list of names.
   *
   * @throws IllegalArgumentException naming an unknown strategy and the known ones
   */
  public static List<Strategy> parseList(String names) {
    List<Strategy> out = new ArrayList<>();
    for (String n : names.split(",")) {
      String s = n.trim().toLowerCase(Locale.ROOT);
      if (!s.isEmpty()) {
        out.add(parse(s));
      }
    }
    if (out.isEmpty()) {
      throw new IllegalArgumentException("no strategy given; known: " + known());
    }
    return out;
  }

  /** The strategy named {@code name} (its {@link #cliName()}). */
  public static Strategy parse(String name) {
    for (Strategy s : values()) {
      if (s.cliName.equals(name)) {
        return s;
      }
    }
    throw new IllegalArgumentException("unknown strategy \"" + name + "\"; known: " + known());
  }

  private static String known() {
    List<String> k = new ArrayList<>();
    for (Strategy s : values()) {
      k.add(s.cliName);
    }
    return String.join(", ", k);
  }
}
