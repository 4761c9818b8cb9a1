package io.kvroute.kvindex.event;

import io.kvroute.kvindex.event.internal.Json;
import java.util.List;
import java.util.Objects;

/**
 * One {@code KVEventBatch}: the events one scheduler step produced on one publisher. Build with
 * {@link #of(double, List)} or {@link #builder()}.
 *
 * <p>Immutable (the event list is copied, or held unmodifiable when the decoder made it);
 * thread-safe.
 */
public final class KvEventBatch {
  private final double ts;
  private final List<KvEvent> events;
  private final Integer dataParallelRank;
  private final EventSchema schema;
  private final int unknownEvents;

  // events must be unmodifiable (the decoder's constructor; the builder copies)
  KvEventBatch(
      double ts,
      List<KvEvent> events,
      Integer dataParallelRank,
      EventSchema schema,
      int unknownEvents) {
    this.ts = ts;
    this.events = events;
    this.dataParallelRank = dataParallelRank;
    this.schema = schema;
    this.unknownEvents = unknownEvents;
  }

  /** A batch in the current vLLM schema ({@link EventSchema#M0}) with DP rank 0. */
  public static KvEventBatch of(double ts, List<? extends KvEvent> events) {
    return builder().ts(ts).events(events).build();
  }

  /** A builder (defaults: ts 0, no events, DP rank 0, schema {@link EventSchema#M0}). */
  public static Builder builder() {
    return new Builder();
  }

  /** A builder holding this batch's values. */
  public Builder toBuilder() {
    return builder()
        .ts(ts)
        .events(events)
        .dataParallelRank(dataParallelRank)
        .schema(schema)
        .unknownEvents(unknownEvents);
  }

  /** Wall-clock epoch seconds (vLLM's {@code time.time()}). */
  public double ts() {
    return ts;
  }

  /** The events in order (unmodifiable). */
  public List<KvEvent> events() {
    return events;
  }

  /**
   * {@code data_parallel_rank} (SGLang: {@code attn_dp_rank}), or {@code null} when absent (A0
   * schema).
   */
  public Integer dataParallelRank() {
    return dataParallelRank;
  }

  /** The data-parallel rank, 0 when absent. */
  public int dpRank() {
    return dataParallelRank == null ? 0 : dataParallelRank;
  }

  /**
   * The schema family the payload matched when decoded (a best guess where families encode
   * identically), or the one to use when encoding.
   */
  public EventSchema schema() {
    return schema;
  }

  /** Events with an unknown tag that the decoder skipped. */
  public int unknownEvents() {
    return unknownEvents;
  }

  /** The same events tagged with another schema (for encoding). */
  public KvEventBatch withSchema(EventSchema s) {
    return new KvEventBatch(
        ts, events, dataParallelRank, Objects.requireNonNull(s, "schema"), unknownEvents);
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

  @Override
  public boolean equals(Object o) {
    if (!(o instanceof KvEventBatch)) {
      return false;
    }
    KvEventBatch b = (KvEventBatch) o;
    return Double.compare(ts, b.ts) == 0
        && events.equals(b.events)
        && Objects.equals(dataParallelRank, b.dataParallelRank)
        && schema == b.schema
        && unknownEvents == b.unknownEvents;
  }

  @Override
  public int hashCode() {
    return Objects.hash(ts, events, dataParallelRank, schema, unknownEvents);
  }

  @Override
  public String toString() {
    return "KvEventBatch[ts="
        + ts
        + ", events="
        + events
        + ", dataParallelRank="
        + dataParallelRank
        + ", schema="
        + schema
        + ", unknownEvents="
        + unknownEvents
        + "]";
  }

  /** Builds {@link KvEventBatch}es; validates at {@link #build()}. Not thread-safe. */
  public static final class Builder {
    private double ts;
    private List<? extends KvEvent> events = List.of();
    private Integer dataParallelRank = 0;
    private EventSchema schema = EventSchema.M0;
    private int unknownEvents;

    private Builder() {}

    /** Wall-clock epoch seconds. */
    public Builder ts(double ts) {
      this.ts = ts;
      return this;
    }

    /** The events in order (copied at {@link #build()}). */
    public Builder events(List<? extends KvEvent> events) {
      this.events = Objects.requireNonNull(events, "events");
      return this;
    }

    /** The DP rank (default 0; {@code null}: absent, as in the A0 schema). */
    public Builder dataParallelRank(Integer rank) {
      this.dataParallelRank = rank;
      return this;
    }

    /** The schema family (default {@link EventSchema#M0}). */
    public Builder schema(EventSchema schema) {
      this.schema = Objects.requireNonNull(schema, "schema");
      return this;
    }

    /** Events with an unknown tag that were skipped (default 0). */
    public Builder unknownEvents(int unknownEvents) {
      this.unknownEvents = unknownEvents;
      return this;
    }

    /**
     * Builds the batch.
     *
     * @throws IllegalArgumentException if {@code unknownEvents < 0}
     * @throws NullPointerException if an event is {@code null}
     */
    public KvEventBatch build() {
      if (unknownEvents < 0) {
        throw new IllegalArgumentException("unknownEvents must be >= 0, was " + unknownEvents);
      }
      return new KvEventBatch(ts, List.copyOf(events), dataParallelRank, schema, unknownEvents);
    }
  }
}
