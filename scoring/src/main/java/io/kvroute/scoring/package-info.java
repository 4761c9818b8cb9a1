/**
 * Endpoint scheduling for KV-cache-aware and prefill/decode routing: filters, scorers, pickers, the
 * PD decision, engine metrics and tokenization, composed by {@link io.kvroute.scoring.Scheduler}.
 *
 * <h2>Entry points</h2>
 *
 * <ul>
 *   <li>{@link io.kvroute.scoring.Scheduler} — {@code pick} (in-memory, event-loop safe), {@code
 *       pickAsync} (tokenizes first), lifecycle hooks {@code onRouted} / {@code onComplete}.
 *   <li>{@link io.kvroute.scoring.SchedulingRequest} in, {@link io.kvroute.scoring.Decision} out.
 *   <li>{@link io.kvroute.scoring.Filters}, {@link io.kvroute.scoring.Scorers}, {@link
 *       io.kvroute.scoring.Pickers}, {@link io.kvroute.scoring.PdDecider} — the built-in plugins;
 *       {@link io.kvroute.scoring.Profile} composes them.
 *   <li>{@link io.kvroute.scoring.SchedulerConfigLoader} — llm-d {@code EndpointPickerConfig}
 *       shaped YAML/JSON; plugin types are {@link io.kvroute.scoring.SchedulerPluginProvider}s
 *       registered by name through {@link java.util.ServiceLoader} (kvroute's own included), so a
 *       jar of filters, scorers, pickers, PD deciders or {@link io.kvroute.scoring.ProfileHandler}s
 *       adds types that configurations name.
 *   <li>{@link io.kvroute.scoring.MetricsStore}, {@link io.kvroute.scoring.MetricsScraper}, {@link
 *       io.kvroute.scoring.HealthProbe} — engine signals.
 *   <li>{@link io.kvroute.scoring.Tokenizer}, {@link io.kvroute.scoring.Tokenizers} — token ids for
 *       the precise scorer; {@link io.kvroute.scoring.BlockIndexLookup} adapts kvindex.
 * </ul>
 *
 * <h2>Defaults that differ from upstream</h2>
 *
 * <table>
 *   <caption>kvroute defaults next to upstream's</caption>
 *   <tr><th>Setting</th><th>kvroute</th><th>llm-d upstream</th><th>Why</th></tr>
 *   <tr><td>{@code load-aware-scorer.threshold}</td><td>10</td><td>128</td>
 *       <td>the llm-d seed documents {@code LoadAwareScorer threshold: 10} (also Kthena's
 *       {@code maxWaitingRequests} 10)</td></tr>
 *   <tr><td>PD decider of a {@code Scheduler} built in code without one</td><td>{@code
 *       prefix-based-pd-decider} with {@code nonCachedTokens} 10 (disaggregate when &ge; 10
 *       tokens are uncached)</td><td>no decider: no PD</td><td>the llm-d seed documents
 *       "default: 10 new tokens". A loaded {@code EndpointPickerConfig} follows llm-d exactly:
 *       {@code nonCachedTokens} defaults to 0 (= never) and compares with &ge;, {@code
 *       promptTokens} gates on prompt length</td></tr>
 *   <tr><td>speculative entries</td><td>on, TTL 2 s</td><td>off, TTL 2 s</td>
 *       <td>bursts of one prefix should not scatter</td></tr>
 *   <tr><td>no-hit LRU, never-used endpoints</td><td>all score 1.0</td><td>ranked in candidate
 *       order</td><td>the random tie-break then spreads them</td></tr>
 *   <tr><td>engine metrics unknown or stale</td><td>score 0 ("unknown")</td><td>last value</td>
 *       <td>a silent endpoint must not look idle</td></tr>
 * </table>
 *
 * <h2>Metrics</h2>
 *
 * With {@link io.kvroute.scoring.Scheduler.Builder#meterRegistry}: {@code
 * kvroute.scheduler.duration{result}}, {@code kvroute.scheduler.plugin.duration{profile, plugin,
 * kind}}, {@code kvroute.scheduler.decisions{result}}, {@code
 * kvroute.scheduler.pd.decisions{outcome}}, {@code kvroute.scheduler.tokenization.failures}, and
 * the size and eviction meters of every bounded map ({@code kvroute.scheduler.inflight.*}, {@code
 * .approx.prefix.*}, {@code .speculative.*}, {@code .sessions*}, {@code .nohit.lru.size}, {@code
 * .metrics.*}).
 */
package io.kvroute.scoring;
