package io.kvroute.spring.gateway;

import io.kvroute.config.ConfigException;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.KVConnectors;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.zmq.KvEventListener;
import io.kvroute.pd.ConnectorConfigs;
import io.kvroute.pd.MicrometerConnectorListener;
import io.kvroute.router.KvEventFeed;
import io.kvroute.router.KvEventFeeds;
import io.kvroute.router.KvRouter;
import io.kvroute.scoring.BlockIndexLookup;
import io.kvroute.scoring.Scheduler;
import io.kvroute.scoring.SchedulerConfigLoader;
import io.kvroute.scoring.Tokenizer;
import io.kvroute.scoring.TokenizerChain;
import io.kvroute.scoring.Tokenizers;
import io.micrometer.core.instrument.MeterRegistry;
import java.nio.file.Path;
import java.util.Map;
import org.springframework.util.ClassUtils;

/**
 * Builds the {@link KvRouter} that {@link KvRouteProperties} describe, as {@code kvroute gateway}
 * builds it from its configuration file. Problems are {@link ConfigException}s whose path is the
 * full property name ({@code kvroute.models[llama].tokenizer.path}).
 */
final class RouterFactory {
  private static final String HF_TOKENIZER = "io.kvroute.tokenizer.hf.HfTokenizer";

  private RouterFactory() {}

  /**
   * The router.
   *
   * @param freshness where the KV-event feed reports batches (null: nowhere)
   * @throws ConfigException naming the property
   */
  static KvRouter build(
      KvRouteProperties p, MeterRegistry meters, ClassLoader loader, EventFreshness freshness) {
    Scheduler.Builder sb = scheduler(p);
    BlockIndex index = null;
    if (p.getIndex() != null) {
      index =
          BlockIndex.inMemory(
              IndexConfig.builder()
                  .blockSize(p.getIndex().getBlockSize())
                  .meterRegistry(meters)
                  .build());
    }
    boolean pd =
        p.getEndpoints().stream()
            .anyMatch(e -> KvRouteProperties.role(e.getRole()) == Endpoint.Role.PREFILL);
    sb.pdEnabled(pd).meterRegistry(meters).tokenizer(tokenizer(p, meters, loader));
    KVConnectors connectors = KVConnectors.discover(loader);
    KvRouter.Builder b =
        KvRouter.builder()
            .connectors(connectors)
            .defaultConnector(
                connector(
                    connectors,
                    p.getDefaultConnector(),
                    KvRouteProperties.PREFIX + ".default-connector"))
            .observabilityHeaders(p.isObservabilityHeaders())
            .listener(new MicrometerConnectorListener(meters))
            .meterRegistry(meters)
            .drainTimeout(p.getDrainTimeout())
            .maxRequestBytes((int) p.getMaxRequestSize().toBytes());
    if (index != null) {
      sb.prefixCacheLookup(BlockIndexLookup.of(index));
      b.eventFeed(
          KvEventFeeds.zmq(
              KvEventFeeds.subscriberFor(index)
                  .meterRegistry(meters)
                  .listener(freshness == null ? KvEventListener.NONE : freshness)
                  .build(),
              index));
    }
    b.scheduler(sb.build());
    p.getEndpoints()
        .forEach(
            e -> {
              KvRouteProperties.KvEvents ev = e.getKvEvents();
              b.endpoint(
                  e.endpoint(),
                  ev == null
                      ? null
                      : new KvEventFeed.Source(ev.getPublisher(), ev.getReplay(), ev.getTopic()));
            });
    p.getModels()
        .forEach(
            (name, m) -> {
              if (m != null && m.getKvConnector() != null && !m.getKvConnector().isEmpty()) {
                b.model(
                    name,
                    connector(
                        connectors,
                        m.getKvConnector(),
                        KvRouteProperties.PREFIX + ".models[" + name + "].kv-connector"));
              }
            });
    if (p.getScrapeMetrics() != null) {
      b.scrapeMetrics(p.getScrapeMetrics());
    }
    return b.build();
  }

  /** A connector section whose type has a provider on the class path. */
  private static ConnectorConfig connector(
      KVConnectors connectors, Map<String, Object> section, String at) {
    ConnectorConfig c = ConnectorConfigs.bind(KvRouteProperties.connectorSection(section), at);
    if (!connectors.types().contains(c.type())) {
      throw ConfigException.unknown(at + ".type", "connector type", c.type(), connectors.types());
    }
    return c;
  }

  /** The scheduler the properties name: the file, or kvroute's default profiles. */
  static Scheduler.Builder scheduler(KvRouteProperties p) {
    if (p.getScheduler() != null && !p.getScheduler().isBlank()) {
      try {
        return SchedulerConfigLoader.create().load(Path.of(p.getScheduler()));
      } catch (ConfigException e) {
        throw e.under(KvRouteProperties.PREFIX + ".scheduler");
      }
    }
    Scheduler.Builder sb = Scheduler.builder();
    Scheduler.defaultProfiles(p.getIndex() != null).forEach(sb::profile);
    return sb.prefillProfile(Scheduler.PREFILL_PROFILE);
  }

  /** The pods' {@code /tokenize}, behind the local tokenizers of the models that name one. */
  static Tokenizer tokenizer(KvRouteProperties p, MeterRegistry meters, ClassLoader loader) {
    Tokenizers.VllmTokenizer remote = Tokenizers.vllm().meterRegistry(meters).build();
    TokenizerChain.Builder chain = null;
    for (Map.Entry<String, KvRouteProperties.Model> e : p.getModels().entrySet()) {
      KvRouteProperties.LocalTokenizer t =
          e.getValue() == null ? null : e.getValue().getTokenizer();
      if (t == null) {
        continue;
      }
      String at = KvRouteProperties.PREFIX + ".models[" + e.getKey() + "].tokenizer";
      if (!ClassUtils.isPresent(HF_TOKENIZER, loader)) {
        throw new ConfigException(
            at + ".path",
            "local tokenizers need io.kvroute:kvroute-tokenizer-hf on the class path (add the"
                + " dependency, or remove the property to use the pods' /tokenize)");
      }
      if (chain == null) {
        chain = Tokenizers.chain().remote(remote).meterRegistry(meters);
      }
      chain.local(e.getKey(), LocalTokenizers.load(at, e.getKey(), t, meters), t.isFallback());
    }
    return chain == null ? remote : chain.build();
  }
}
