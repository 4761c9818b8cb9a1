package io.kvroute.pd;

import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.ConnectorListener;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * Records connector activity in Micrometer. Metric names (Prometheus form):
 *
 * <table>
 *   <caption>Connector metrics</caption>
 *   <tr><th>metric</th><th>tags</th><th>meaning</th></tr>
 *   <tr><td>{@code kvroute_connector_prefill_seconds}</td><td>type, outcome</td><td>prefill legs
 *       (count and duration)</td></tr>
 *   <tr><td>{@code kvroute_connector_decode_head_seconds}</td><td>type, outcome</td><td>time to
 *       the decode response head</td></tr>
 *   <tr><td>{@code kvroute_connector_decode_ttfb_seconds}</td><td>type</td><td>request start to
 *       first decode body byte at the caller</td></tr>
 *   <tr><td>{@code kvroute_connector_decode_inter_chunk_seconds}</td><td>type</td><td>gap between
 *       decode chunks</td></tr>
 *   <tr><td>{@code kvroute_connector_decode_seconds}</td><td>type, outcome</td><td>whole decode
 *       legs</td></tr>
 *   <tr><td>{@code kvroute_connector_retries_total}</td><td>type, cause</td><td>retries on another
 *       pair</td></tr>
 *   <tr><td>{@code kvroute_connector_retry_budget_exhausted_total}</td><td>type</td><td>retries
 *       refused by the budget</td></tr>
 *   <tr><td>{@code kvroute_connector_errors_total}</td><td>type, error</td><td>requests that failed
 *       for good</td></tr>
 *   <tr><td>{@code kvroute_connector_events_total}</td><td>type, event</td><td>connector-specific
 *       events (e.g. {@code prefill_without_kv_transfer_params})</td></tr>
 *   <tr><td>{@code kvroute_connector_circuit_open}</td><td></td><td>endpoints whose breaker is open
 *       now</td></tr>
 * </table>
 *
 * <p>Thread-safe. Tag values come from a small fixed set (connector types, outcomes); endpoint ids
 * are deliberately not tags, to keep cardinality bounded.
 */
public final class MicrometerConnectorListener implements ConnectorListener {
  private static final int MAX_CACHED = 1024;

  private final MeterRegistry registry;
  private final Set<String> openCircuits = ConcurrentHashMap.newKeySet();

  /**
   * Meters already registered, by name and tag values: looking one up in the registry builds an id
   * and sorts its tags on every call, a measurable share of a request's CPU. Tag values come from a
   * small fixed set; past {@value #MAX_CACHED} entries meters are looked up in the registry again.
   */
  private final ConcurrentHashMap<Key, Meter> meters = new ConcurrentHashMap<>();

  private record Key(String name, String tag1, String tag2) {}

  /** Binds to {@code registry} and registers the circuit gauge. */
  public MicrometerConnectorListener(MeterRegistry registry) {
    this.registry = registry;
    registry.gauge("kvroute.connector.circuit.open", openCircuits, Set::size);
  }

  private Timer timer(String name, String type, String outcome) {
    Key k = new Key(name, type, outcome);
    Meter m = meters.get(k);
    if (m == null) {
      Timer.Builder b = Timer.builder(name).tag("type", type).publishPercentileHistogram(false);
      if (outcome != null) {
        b.tag("outcome", outcome);
      }
      m = b.register(registry);
      cache(k, m);
    }
    return (Timer) m;
  }

  private Counter counter(String name, String type, String tag, String value) {
    Key k = new Key(name, type, value);
    Meter m = meters.get(k);
    if (m == null) {
      Counter.Builder b = Counter.builder(name).tag("type", type);
      if (tag != null) {
        b.tag(tag, value);
      }
      m = b.register(registry);
      cache(k, m);
    }
    return (Counter) m;
  }

  private void cache(Key k, Meter m) {
    if (meters.size() < MAX_CACHED) {
      meters.putIfAbsent(k, m);
    }
  }

  @Override
  public void prefillEnded(String type, String endpointId, String outcome, long nanos) {
    timer("kvroute.connector.prefill", type, outcome).record(nanos, TimeUnit.NANOSECONDS);
  }

  @Override
  public void decodeHead(String type, String endpointId, String outcome, long nanos) {
    timer("kvroute.connector.decode.head", type, outcome).record(nanos, TimeUnit.NANOSECONDS);
  }

  @Override
  public void decodeFirstByte(String type, String endpointId, long nanos) {
    timer("kvroute.connector.decode.ttfb", type, null).record(nanos, TimeUnit.NANOSECONDS);
  }

  @Override
  public void decodeChunk(String type, long nanosSincePrevious) {
    Key k = new Key("kvroute.connector.decode.inter.chunk", type, null);
    Meter m = meters.get(k);
    if (m == null) {
      m =
          DistributionSummary.builder("kvroute.connector.decode.inter.chunk")
              .baseUnit("seconds")
              .tags("type", type)
              .register(registry);
      cache(k, m);
    }
    ((DistributionSummary) m).record(nanosSincePrevious / 1e9);
  }

  @Override
  public void decodeEnded(String type, String endpointId, String outcome, long nanos) {
    timer("kvroute.connector.decode", type, outcome).record(nanos, TimeUnit.NANOSECONDS);
  }

  @Override
  public void retry(String type, int attempt, ConnectorException cause) {
    counter("kvroute.connector.retries", type, "cause", ConnectorListener.outcome(cause))
        .increment();
  }

  @Override
  public void failed(String type, ConnectorException cause) {
    counter("kvroute.connector.errors", type, "error", ConnectorListener.outcome(cause))
        .increment();
  }

  @Override
  public void connectorEvent(String type, String event) {
    counter("kvroute.connector.events", type, "event", event).increment();
  }

  @Override
  public void circuitStateChanged(String endpointId, boolean open) {
    if (open) {
      openCircuits.add(endpointId);
    } else {
      openCircuits.remove(endpointId);
    }
  }

  @Override
  public void retryBudgetExhausted(String type) {
    counter("kvroute.connector.retry.budget.exhausted", type, null, null).increment();
  }
}
