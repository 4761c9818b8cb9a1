package io.kvroute.kvindex.zmq.internal;

import io.kvroute.kvindex.event.KvEventCodec;
import io.kvroute.kvindex.event.KvEventSink;
import io.kvroute.kvindex.zmq.KvEventListener;
import io.micrometer.core.instrument.MeterRegistry;
import java.nio.channels.SelectableChannel;
import java.util.function.LongSupplier;
import java.util.function.Predicate;
import org.zeromq.ZContext;

/**
 * The validated settings of a {@code KvEventSubscriber} (its builder documents each one).
 *
 * <p>Immutable; thread-safe.
 *
 * @param context a shared JeroMQ context, or {@code null} for a private one
 * @param bindEndpoint the SUB endpoint to bind, or {@code null} (connect mode only)
 * @param stallCheck whether a connection whose handshake has not completed is stalled ({@link
 *     ReplayClient#stalled} outside tests)
 */
public record SubscriberConfig(
    KvEventSink sink,
    KvEventListener listener,
    String topic,
    String bindEndpoint,
    int shards,
    int queueCapacity,
    int maxPayloadBytes,
    int receiveHwm,
    long reconnectIntervalMs,
    long reconnectIntervalMaxMs,
    int handshakeMs,
    int replayIdleMs,
    long replayTimeoutNanos,
    long replayCooldownNanos,
    int replayThreads,
    int replayBufferCapacity,
    long pollIntervalMs,
    int maxPods,
    KvEventCodec.Dialect dialect,
    MeterRegistry meterRegistry,
    LongSupplier nanoClock,
    ZContext context,
    Predicate<SelectableChannel> stallCheck) {}
