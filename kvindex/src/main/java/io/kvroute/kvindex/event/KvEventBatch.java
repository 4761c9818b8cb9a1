package io.kvroute.kvindex.event;

import io.kvroute.kvindex.event.internal.Json;
import java.util.List;
import java.util.Objects;

/**
 * One {@code KVEventBatch}: the events one scheduler step produced on one publisher.
 *
 * <p>Immutable (the event list is copied); thread-safe.
 *
 * @param ts wall-clock epoch seconds (vLLM's {@code time.time()})
 * @param events the events in order
 * @param dataParallelRank {@code data_parallel_rank} (SGLang: {@code attn_dp_rank}), or {@code
 *     null} when absent (A0 schema)
 * @param schema the schema family the payload matched when decoded (a best guess where families
 *     encode identically), or the one to use when encoding
 * @param unknownEvents events with an unknown tag that the decoder skipped
 */
public record KvEventBatch(
    double ts,
    List<KvEvent> events,
    Integer dataParallelRank,
    EventSchema schema,
    int unknownEvents) {

  /** Validates and copies. */
  public KvEventBatch {
    events = List.copyOf(Objects.requireNonNull(events, "events"));
    Objects.requireNonNull(schema, "schema");
    if (unknownEvents < 0) {
      throw new IllegalArgumentException("unknownEvents must be >= 0, was " + unknownEvents);
    }
  }

  /** A batch in the current vLLM schema ({@link EventSchema#M0}) with DP rank 0. */
  public static KvEventBatch of(double ts, List<KvEvent> events) {
    return new KvEventBatch(ts, events, 0, EventSchema.M0, 0);
  }

  /** The data-parallel rank, 0 when absent. */
  public int dpRank() {
    return dataParallelRank == null ? 0 : dataParallelRank;
  }

  /** The same events tagged with another schema (for encoding). */
  public KvEventBatch withSchema(EventSchema s) {
    return new KvEventBatch(ts, events, dataParallelRank, s, unknownEvents);
  }

  /** The same batch with another DP rank ({@code null}: absent). */
  public KvEventBatch withDataParallelRank(Integer rank) {
    return new KvEventBatch(ts, events, rank, schema, unknownEvents);
  }

  /**
   * The batch as one JSON object: {@code {"ts":…,"dp_rank":…,"events":[…]}}. Hashes are unsigned
   * decimal strings; hashes sent as bytes also get a {@code *_hex} list; bytes elsewhere are hex
   * strings.
   */
  public String toJson() {
    StringBuilder sb = new StringBuilder(256);
    sb.append("{\"ts\":");
    Json.number(sb, ts);
    sb.append(",\"dp_rank\":");
    sb.append(dataParallelRank == null ? "null" : dataParallelRank.toString());
    sb.append(",\"events\":");
    appendEventsJson(sb);
    return sb.append('}').toString();
  }

  /** Appends the events as a JSON array (the format of {@link #toJson()}). */
  public void appendEventsJson(StringBuilder sb) {
    Json.events(sb, events);
  }
}
