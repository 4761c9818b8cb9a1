package io.kvroute.kvindex.internal;

import io.kvroute.kvindex.PrefixMatch;
import java.util.List;

/**
 * Internal bridge that lets index implementations fill a {@link PrefixMatch} without public
 * mutators (installed by {@code PrefixMatch}'s static initialiser). Not part of the API.
 */
public abstract class MatchWriter {
  private static volatile MatchWriter instance;

  /** Installs the writer; called once by {@link PrefixMatch}. */
  public static void install(MatchWriter writer) {
    instance = writer;
  }

  /** The installed writer (for index implementations in other kvroute modules). */
  public static MatchWriter get() {
    MatchWriter w = instance;
    if (w == null) {
      new PrefixMatch(); // forces PrefixMatch's static initialiser
      w = instance;
    }
    return w;
  }

  /** Clears {@code m} for {@code pods} pods and {@code blocks} request blocks. */
  public abstract void reset(PrefixMatch m, int pods, int blocks, List<String> tierNames);

  /** Sets pod {@code i}'s results. */
  public abstract void set(PrefixMatch m, int i, String pod, int matched, double score);

  /**
   * Sets the pod ids of every position from {@code pods} (after {@link #reset}); {@link #set} then
   * need not be called for pods that matched nothing.
   */
  public abstract void names(PrefixMatch m, List<String> pods);

  /** Adds to pod {@code i}'s block count on {@code tier}. */
  public abstract void addTierBlocks(PrefixMatch m, int i, int tier, int count);

  /** Pod {@code i}'s block count on {@code tier}. */
  public abstract int tierBlocks(PrefixMatch m, int i, int tier);

  /** Pod {@code i}'s matched blocks. */
  public abstract int matched(PrefixMatch m, int i);
}
