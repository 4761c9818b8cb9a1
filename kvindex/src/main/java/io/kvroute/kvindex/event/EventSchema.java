package io.kvroute.kvindex.event;

/**
 * The msgspec schema families of vLLM's {@code KVEventBatch} (spec §1.6). Each fixes the batch
 * length, whether events are arrays or maps, and the declared field lists (a prefix of the full
 * field order below).
 *
 * <p>BlockStored fields, in declaration order: {@code block_hashes, parent_block_hash, token_ids,
 * block_size, lora_id, medium, lora_name, extra_keys=None, group_idx=None, kv_cache_spec_kind=None,
 * kv_cache_spec_sliding_window=None, locality=None, ownership=None, session_id=None}. BlockRemoved:
 * {@code block_hashes, medium, group_idx=None, locality=None, ownership=None}.
 */
public enum EventSchema {
  /** PR #16750: {@code [ts, events]}, BlockStored with 5 fields. */
  A0(false, 2, 5, 1),
  /** PR #18925: adds {@code data_parallel_rank} to the batch (also SGLang's legacy layout). */
  A0_DP(false, 3, 5, 1),
  /** Adds {@code medium}. */
  A1(false, 3, 6, 2),
  /** Adds {@code lora_name}. */
  A2(false, 3, 7, 2),
  /** Adds {@code extra_keys}. */
  A3(false, 3, 8, 2),
  /** Adds {@code group_idx} (both event types). */
  A4(false, 3, 9, 3),
  /** Adds {@code kv_cache_spec_kind, kv_cache_spec_sliding_window}; the last array schema. */
  A5(false, 3, 11, 3),
  /** PR #42892: events are tagged maps, defaulted {@code None} fields omitted. */
  M0(true, 3, 11, 3),
  /** Adds {@code locality} (both event types). */
  M1(true, 3, 12, 4),
  /** Adds {@code ownership} (both) and {@code session_id} (BlockStored). */
  M2(true, 3, 14, 5);

  /** BlockStored field names in declaration order. */
  static final String[] STORED_FIELDS = {
    "block_hashes",
    "parent_block_hash",
    "token_ids",
    "block_size",
    "lora_id",
    "medium",
    "lora_name",
    "extra_keys",
    "group_idx",
    "kv_cache_spec_kind",
    "kv_cache_spec_sliding_window",
    "locality",
    "ownership",
    "session_id"
  };

  /** Number of leading BlockStored fields without a default (always written in maps). */
  static final int STORED_REQUIRED = 7;

  /** BlockRemoved field names in declaration order. */
  static final String[] REMOVED_FIELDS = {
    "block_hashes", "medium", "group_idx", "locality", "ownership"
  };

  /** Number of leading BlockRemoved fields without a default. */
  static final int REMOVED_REQUIRED = 2;

  private final boolean mapEvents;
  private final int batchFields;
  private final int storedFields;
  private final int removedFields;

  EventSchema(boolean mapEvents, int batchFields, int storedFields, int removedFields) {
    this.mapEvents = mapEvents;
    this.batchFields = batchFields;
    this.storedFields = storedFields;
    this.removedFields = removedFields;
  }

  /** Whether events are msgpack maps tagged by {@code "type"} (else positional arrays). */
  public boolean mapEvents() {
    return mapEvents;
  }

  /** Elements of the outer batch array: 2 ({@code [ts, events]}) or 3 (with the DP rank). */
  public int batchFields() {
    return batchFields;
  }

  /** Declared BlockStored fields (excluding the tag). */
  public int storedFields() {
    return storedFields;
  }

  /** Declared BlockRemoved fields (excluding the tag). */
  public int removedFields() {
    return removedFields;
  }
}
