package io.kvroute.replay;

/**
 * Progress of a replay, for a progress bar. Called on the replay's thread; must be quick. All
 * methods have no-op defaults.
 */
public interface ReplayListener {
  /** Ignores everything. */
  ReplayListener NONE = new ReplayListener() {};

  /** A strategy's run starts. */
  default void onStrategyStart(Strategy strategy, int requests) {}

  /** {@code done} of {@code total} requests have completed (called every few hundred). */
  default void onProgress(Strategy strategy, int done, int total) {}

  /** A strategy's run ended. */
  default void onStrategyEnd(StrategyResult result) {}
}
