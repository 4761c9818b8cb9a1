package io.kvroute.replay.internal;

import io.kvroute.replay.Slo;

/**
 * One request of a workload: when it arrives, its prompt as a run of segments (a trace's prefix
 * block ids, or a shape's system prompt and question), its output length and its class.
 *
 * <p>Equal segment ids give equal tokens at equal offsets within the segment, so requests that
 * share a run of leading segments share that prefix token for token. Immutable by contract (arrays
 * are not copied).
 *
 * @param arrivalMillis arrival time from the start of the workload
 * @param inputLength prompt tokens
 * @param outputLength output tokens
 * @param segmentIds the prompt's segments, in order
 * @param segmentLengths tokens per segment (the last may be cut by {@code inputLength})
 * @param tag its class, priority, tenant and objective ({@link Tag#NONE} when not annotated)
 */
public record TraceRecord(
    double arrivalMillis,
    int inputLength,
    int outputLength,
    long[] segmentIds,
    int[] segmentLengths,
    Tag tag) {

  /** A record without annotations. */
  public TraceRecord(
      double arrivalMillis,
      int inputLength,
      int outputLength,
      long[] segmentIds,
      int[] segmentLengths) {
    this(arrivalMillis, inputLength, outputLength, segmentIds, segmentLengths, Tag.NONE);
  }

  /** The same request with another tag. */
  public TraceRecord withTag(Tag t) {
    return new TraceRecord(arrivalMillis, inputLength, outputLength, segmentIds, segmentLengths, t);
  }

  /**
   * A request's annotations.
   *
   * @param className its class in reports (null: none)
   * @param priority its priority
   * @param tenant its tenant
   * @param slo its objective (null: the replay's)
   */
  public record Tag(String className, int priority, String tenant, Slo slo) {
    /** No annotations: priority 0, tenant {@code default}, the replay's objective. */
    public static final Tag NONE = new Tag(null, 0, "default", null);
  }
}
