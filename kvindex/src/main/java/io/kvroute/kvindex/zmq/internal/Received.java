package io.kvroute.kvindex.zmq.internal;

import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventCodec;
import io.kvroute.kvindex.event.KvEventDecodeException;
import io.kvroute.kvindex.hash.internal.Xxh64;

/**
 * One batch as received, live or replayed: its sequence number and topic, the decoded batch or why
 * there is none, and what the {@link Sequencer} needs (payload fingerprint, {@code ts}). Decoded
 * once, where it is received, so the sequencer can compare times.
 *
 * <p>Immutable; thread-safe.
 */
public final class Received implements Sequencer.Item {
  private static final long FINGERPRINT_SEED = 0x6b76726f757465L;

  final long seq;
  final String topic;
  final int size;
  final KvEventBatch batch; // null when the payload was unreadable or malformed
  final KvEventDecodeException error; // why a payload did not decode
  private final boolean hasFingerprint;
  private final long fingerprint;

  private Received(
      long seq,
      String topic,
      int size,
      KvEventBatch batch,
      KvEventDecodeException error,
      boolean hasFingerprint,
      long fingerprint) {
    this.seq = seq;
    this.topic = topic;
    this.size = size;
    this.batch = batch;
    this.error = error;
    this.hasFingerprint = hasFingerprint;
    this.fingerprint = fingerprint;
  }

  /** Decodes {@code payload} ({@code null}: refused for its size, never read). */
  static Received decode(
      long seq, String topic, byte[] payload, int size, KvEventCodec.Dialect dialect) {
    if (payload == null) {
      return new Received(seq, topic, size, null, null, false, 0);
    }
    long fp = Xxh64.hash(payload, payload.length, FINGERPRINT_SEED);
    try {
      KvEventBatch b = KvEventCodec.decode(payload, 0, payload.length, dialect);
      return new Received(seq, topic, size, b, null, true, fp);
    } catch (KvEventDecodeException e) {
      return new Received(seq, topic, size, null, e, true, fp);
    }
  }

  /** A replayed batch JeroMQ refused for its size: its sequence number only. */
  static Received unreadable(long seq, String topic) {
    return new Received(seq, topic, -1, null, null, false, 0);
  }

  @Override
  public long seq() {
    return seq;
  }

  @Override
  public boolean hasFingerprint() {
    return hasFingerprint;
  }

  @Override
  public long fingerprint() {
    return fingerprint;
  }

  @Override
  public double ts() {
    return batch == null ? Double.NaN : batch.ts();
  }

  @Override
  public String toString() {
    return Long.toUnsignedString(seq) + (batch == null ? " (undecoded)" : "");
  }
}
