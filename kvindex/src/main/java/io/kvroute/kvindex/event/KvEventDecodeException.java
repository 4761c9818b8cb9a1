package io.kvroute.kvindex.event;

/**
 * A KV-event payload is not a well-formed vLLM/SGLang {@code KVEventBatch}: truncated msgpack, a
 * length prefix larger than the remaining bytes, a field of the wrong type, nesting deeper than the
 * decoder allows, and so on.
 *
 * <p>This is the only exception {@link KvEventCodec#decode(byte[])} throws for bad input. It
 * carries the byte offset (from the start of the payload) at which decoding stopped. The stack
 * trace is not filled in: bad payloads are expected input on the ingestion path.
 */
public final class KvEventDecodeException extends RuntimeException {

  private final long offset;

  /**
   * Creates an exception.
   *
   * @param message what was wrong
   * @param offset byte offset within the payload
   * @param cause underlying cause, or {@code null}
   */
  public KvEventDecodeException(String message, long offset, Throwable cause) {
    super(message + " (at byte offset " + offset + ")", cause, false, false);
    this.offset = offset;
  }

  /** Byte offset within the payload at which decoding failed. */
  public long offset() {
    return offset;
  }
}
