package io.kvroute.pd;

import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.ConnectorListener;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
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
  private final MeterRegistry registry;
  private final Set<String> openCircuits = ConcurrentHashMap.newKeySet();

  /** Binds to {@code registry} and registers the circuit gauge. */
  public MicrometerConnectorListener(MeterRegistry registry) {
    this.registry = registry;
    registry.gauge("kvroute.connector.circuit.open", openCircuits, Set::size);
  }

  private Timer timer(String name, String... tags) {
    return Timer.builder(name).tags(tags).publishPercentileHistogram(false).register(registry);
  }

  @Override
  public void prefillEnded(String type, String endpointId, String outcome, long nanos) {
    timer("kvroute.connector.prefill", "type", type, "outcome", outcome)
        .record(nanos, TimeUnit.NANOSECONDS);
  }

  @Override
  public void decodeHead(String type, String endpointId, String outcome, long nanos) {
    timer("kvroute.connector.decode.head", "type", type, "outcome", outcome)
        .record(nanos, TimeUnit.NANOSECONDS);
  }

  @Override
  public void decodeFirstByte(String type, String endpointId, long nanos) {
    timer("kvroute.connector.decode.ttfb", "type", type).record(nanos, TimeUnit.NANOSECONDS);
  }

  @Override
  public void decodeChunk(String type, long nanosSincePrevious) {
    DistributionSummary.builder("kvroute.connector.decode.inter.chunk")
        .baseUnit("seconds")
        .tags("type", type)
        .register(registry)
        .record(nanosSincePrevious / 1e9);
  }

  @Override
  public void decodeEnded(String type, String endpointId, String outcome, long nanos) {
    timer("kvroute.connector.decode", "type", type, "outcome", outcome)
        .record(nanos, TimeUnit.NANOSECONDS);
  }

  @Override
  public void retry(String type, int attempt, ConnectorException cause) {
    Counter.builder("kvroute.connector.retries")
        .tags("type", type, "cause", ConnectorListener.outcome(cause))
        .register(registry)
        .increment();
  }

  @Override
  public void failed(String type, ConnectorException cause) {
    Counter.builder("kvroute.connector.errors")
        .tags("type", type, "error", ConnectorListener.outcome(cause))
        .register(registry)
        .increment();
  }

  @Override
  public void connectorEvent(String type, String event) {
    Counter.builder("kvroute.connector.events")
        .tags("type", type, "event", event)
        .register(registry)
        .increment();
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
    Counter.builder("kvroute.connector.retry.budget.exhausted")
        .tags("type", type)
        .register(registry)
        .increment();
  }
}
