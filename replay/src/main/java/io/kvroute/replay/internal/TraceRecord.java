package io.kvroute.replay.internal;

/**
 * One request of a workload: when it arrives, its prompt as a run of segments (a trace's prefix
 * block ids, or a shape's system prompt and question) and its output length.
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
 */
public record TraceRecord(
    double arrivalMillis,
    int inputLength,
    int outputLength,
    long[] segmentIds,
    int[] segmentLengths) {}
