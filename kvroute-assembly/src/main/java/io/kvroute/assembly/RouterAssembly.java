package io.kvroute.assembly;

import io.kvroute.config.ConfigException;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.KVConnectors;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.hybrid.HybridBlockIndex;
import io.kvroute.kvindex.zmq.KvEventListener;
import io.kvroute.pd.ConnectorConfigs;
import io.kvroute.pd.MicrometerConnectorListener;
import io.kvroute.router.KvEventFeeds;
import io.kvroute.router.KvRouter;
import io.kvroute.router.ParityMonitor;
import io.kvroute.scoring.BlockIndexLookup;
import io.kvroute.scoring.Scheduler;
import io.kvroute.scoring.SchedulerConfigLoader;
import io.kvroute.scoring.Tokenizer;
import io.kvroute.scoring.TokenizerChain;
import io.kvroute.scoring.Tokenizers;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * kvroute's composition root: the {@link KvRouter}, its KV-event index (in memory or on Redis) and
 * its endpoint discovery, built from one {@link RouterSettings}. {@code kvroute gateway}, {@code
 * kvroute epp} and the Spring Cloud Gateway starter all build their router here, so a setting means
 * the same in each of them.
 *
 * <pre>{@code
 * RouterSettings settings = ConfigBinder.create().read(Path.of("router.yaml"), RouterSettings.class);
 * try (RouterAssembly assembly = RouterAssembly.builder(settings).meterRegistry(registry).build()) {
 *   KvRouter router = assembly.router();
 *   ...
 * }
 * }</pre>
 *
 * <p>The optional parts come from optional dependencies, each needed only when its settings are
 * given: {@code kvindex-redis} for {@code index.backend: redis}, {@code kvroute-kubernetes} for
 * {@code discovery.kubernetes}, {@code kvconnector-p2pnccl} and {@code kvconnector-sidecar} for
 * {@code discovery.p2pnccl}, {@code kvroute-tokenizer-hf} for {@code models.*.tokenizer}, {@code
 * kvroute-opentelemetry} (and the OpenTelemetry API) for {@code tracing.enabled}. A setting whose
 * module is missing fails {@link Builder#build} with a {@link ConfigException} naming the key and
 * the artifact to add.
 *
 * <p>Thread-safe. Closing it stops the discovery, then closes the router (which drains requests in
 * flight), then the Redis index's client (with the fleet state: this replica's in-flight counts
 * leave the fleet at once).
 */
public final class RouterAssembly implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(RouterAssembly.class);

  private final RouterSettings settings;
  private final KvRouter router;
  private final Discoveries.Running discovery;
  private final AutoCloseable index;

  private RouterAssembly(
      RouterSettings settings,
      KvRouter router,
      Discoveries.Running discovery,
      AutoCloseable index) {
    this.settings = settings;
    this.router = router;
    this.discovery = discovery;
    this.index = index;
  }

  /** A builder of the router {@code settings} describe. */
  public static Builder builder(RouterSettings settings) {
    return new Builder(settings);
  }

  /** The settings it was built from. */
  public RouterSettings settings() {
    return settings;
  }

  /** The router. */
  public KvRouter router() {
    return router;
  }

  /**
   * What is discovered where, when {@code discovery} is set, for start-up messages: {@code
   * discovering pods in Kubernetes namespace <name>}, {@code P2pNccl instances register at
   * <endpoint>}, or both joined by {@code "; "}.
   */
  public Optional<String> discovery() {
    return discovery == null ? Optional.empty() : Optional.of(discovery.description());
  }

  /** Stops the discovery, closes the router (draining requests in flight), then the index. */
  @Override
  public void close() {
    if (discovery != null) {
      quietly(discovery);
    }
    router.close();
    if (index != null) {
      quietly(index);
    }
  }

  private static void quietly(AutoCloseable c) {
    try {
      c.close();
    } catch (Exception e) {
      log.warn("kvroute: closing {} failed", c, e);
    }
  }

  /** Builds a {@link RouterAssembly}; not thread-safe. */
  public static final class Builder {
    private final RouterSettings settings;
    private Path baseDirectory;
    private MeterRegistry meterRegistry = new SimpleMeterRegistry();
    private HttpTransport transport;
    private ClassLoader classLoader = Thread.currentThread().getContextClassLoader();
    private KvEventListener eventListener = KvEventListener.NONE;

    private Builder(RouterSettings settings) {
      this.settings = Objects.requireNonNull(settings, "settings");
    }

    /**
     * The directory relative file names are resolved against: the scheduler file, the local
     * tokenizers' directories and chat templates (default: the working directory). A command passes
     * its configuration file's directory.
     */
    public Builder baseDirectory(Path dir) {
      this.baseDirectory = dir;
      return this;
    }

    /** Where every meter goes (default: a new {@code SimpleMeterRegistry}). */
    public Builder meterRegistry(MeterRegistry registry) {
      this.meterRegistry = Objects.requireNonNull(registry, "meterRegistry");
      return this;
    }

    /**
     * The transport the connectors send legs with (default: the router's, found with
     * ServiceLoader). The caller keeps it: closing the assembly does not close it.
     */
    public Builder transport(HttpTransport transport) {
      this.transport = Objects.requireNonNull(transport, "transport");
      return this;
    }

    /** Where connectors are found (default: the thread's context class loader). */
    public Builder classLoader(ClassLoader loader) {
      this.classLoader = Objects.requireNonNull(loader, "classLoader");
      return this;
    }

    /** Told of the KV-event feed's batches and gaps, with {@code index} (default none). */
    public Builder eventListener(KvEventListener listener) {
      this.eventListener = Objects.requireNonNull(listener, "eventListener");
      return this;
    }

    /**
     * Builds the index, the router and its endpoints, and starts the discovery (it runs in the
     * background; list and watch failures are retried). What was built is closed again when a later
     * step fails.
     *
     * @throws ConfigException naming the setting's path when a setting cannot be applied: an
     *     unknown connector type, a scheduler file that does not load, a tokenizer that does not
     *     load, an optional module missing
     */
    public RouterAssembly build() {
      requireOptionalModules();
      Deque<AutoCloseable> undo = new ArrayDeque<>();
      try {
        KVConnectors connectors = KVConnectors.discover(classLoader);
        ConnectorConfig defaultConnector = settings.defaultConnectorConfig();
        ConnectorConfigs.check(defaultConnector, "defaultConnector", connectors);
        Map<String, ConnectorConfig> models = settings.modelConnectors();
        models.forEach(
            (model, c) ->
                ConnectorConfigs.check(c, "models." + model + ".kvConnector", connectors));
        Scheduler.Builder sb = scheduler();
        BlockIndex index = null;
        AutoCloseable ownedIndex = null;
        if (settings.index() != null) {
          IndexConfig ic =
              IndexConfig.builder()
                  .blockSize(settings.index().blockSize())
                  .meterRegistry(meterRegistry)
                  .build();
          if (settings.index().redis() == null) {
            index = HybridBlockIndex.inMemory(ic); // plain pods: the in-memory index as is
          } else {
            RedisIndexes.Shared shared =
                RedisIndexes.create(ic, settings.index().redis(), settings.fleet(), meterRegistry);
            index = shared.index();
            ownedIndex = shared.owner();
            undo.push(ownedIndex);
            if (shared.fleet() != null) {
              sb.fleet(shared.fleet());
            }
          }
        }
        sb.pdEnabled(settings.pdEnabled()).meterRegistry(meterRegistry).tokenizer(tokenizer());
        KvRouter.Builder b =
            KvRouter.builder()
                .connectors(connectors)
                .defaultConnector(defaultConnector)
                .observabilityHeaders(settings.observabilityHeaders())
                .drainTimeout(settings.drainTimeout())
                .listener(new MicrometerConnectorListener(meterRegistry))
                .meterRegistry(meterRegistry);
        if (transport != null) {
          b.transport(transport);
        }
        if (settings.tracing().enabled()) {
          Tracings.apply(b);
        }
        if (index != null) {
          sb.prefixCacheLookup(BlockIndexLookup.of(index));
          KvEventListener listener = eventListener;
          RouterSettings.Parity p = settings.index().parity();
          if (p.enabled()) {
            ParityMonitor parity =
                ParityMonitor.builder(settings.index().hashSettings())
                    .threshold(p.threshold())
                    .minSamples(p.minSamples())
                    .window(p.window())
                    .grace(p.grace())
                    .samplesPerSecond(p.samplesPerSecond())
                    .maxPending(p.maxPending())
                    .degrade(p.degrade())
                    .meterRegistry(meterRegistry)
                    .build();
            undo.push(parity);
            b.parity(parity);
            listener = parity.eventListener(eventListener);
          }
          b.eventFeed(
              KvEventFeeds.zmq(
                  KvEventFeeds.subscriberFor(index)
                      .meterRegistry(meterRegistry)
                      .listener(listener)
                      .build(),
                  index));
        }
        b.scheduler(sb.build());
        settings.endpoints().forEach(e -> b.endpoint(e.endpoint(), e.events()));
        models.forEach(b::model);
        if (settings.scrapeMetrics() != null) {
          b.scrapeMetrics(settings.scrapeMetrics());
        }
        if (settings.flowControl() != null) {
          b.flowControl(settings.flowControl().config());
        }
        KvRouter router = b.build();
        undo.push(router);
        Discoveries.Running discovery = null;
        RouterSettings.Discovery d = settings.discovery();
        if (d != null && d.kubernetes() != null) {
          discovery = Discoveries.start(d.kubernetes(), router, meterRegistry);
          undo.push(discovery);
        }
        if (d != null && d.p2pnccl() != null) {
          discovery =
              Discoveries.Running.both(
                  discovery, P2pNcclDiscoveries.start(d.p2pnccl(), router, meterRegistry));
        }
        return new RouterAssembly(settings, router, discovery, ownedIndex);
      } catch (RuntimeException e) {
        undo.forEach(RouterAssembly::quietly);
        throw e;
      }
    }

    /** Fails before anything is built when a setting's optional module is missing. */
    private void requireOptionalModules() {
      if (settings.index() != null && settings.index().redis() != null) {
        Modules.require(
            "io.kvroute.kvindex.redis.RedisBlockIndex", "index.backend", "kvindex-redis");
      }
      if (settings.tracing().enabled()) {
        Modules.require(
            "io.kvroute.opentelemetry.KvRouteTracing", "tracing.enabled", "kvroute-opentelemetry");
        Modules.require(
            "io.opentelemetry.api.GlobalOpenTelemetry", "tracing.enabled", "kvroute-opentelemetry");
      }
      if (settings.discovery() != null && settings.discovery().kubernetes() != null) {
        Modules.require(
            "io.kvroute.kubernetes.KubernetesDiscovery",
            "discovery.kubernetes",
            "kvroute-kubernetes");
      }
      if (settings.discovery() != null && settings.discovery().p2pnccl() != null) {
        Modules.require(
            "io.kvroute.connector.p2pnccl.P2pNcclRegistry",
            "discovery.p2pnccl",
            "kvconnector-p2pnccl");
        Modules.require(
            "io.kvroute.connector.sidecar.PrefillTargetAllowlist",
            "discovery.p2pnccl",
            "kvconnector-sidecar");
      }
      settings
          .tokenizers()
          .keySet()
          .forEach(
              model ->
                  Modules.require(
                      "io.kvroute.tokenizer.hf.HfTokenizer",
                      "models." + model + ".tokenizer.path",
                      "kvroute-tokenizer-hf"));
    }

    /** The scheduler the settings name: its file or mapping, or kvroute's default profiles. */
    private Scheduler.Builder scheduler() {
      if (settings.scheduler() instanceof String file) {
        Path p = RouterSettings.resolve(file, baseDirectory);
        try {
          return SchedulerConfigLoader.create().load(p);
        } catch (ConfigException e) {
          throw e.source().isEmpty() ? e.under("scheduler") : e;
        }
      }
      if (settings.scheduler() instanceof Map<?, ?> m) {
        @SuppressWarnings("unchecked")
        Map<String, ?> mapping = (Map<String, ?>) m;
        return SchedulerConfigLoader.create().load(mapping, "scheduler");
      }
      Scheduler.Builder sb = Scheduler.builder();
      Scheduler.defaultProfiles(settings.index() != null).forEach(sb::profile);
      return sb.prefillProfile(Scheduler.PREFILL_PROFILE);
    }

    /**
     * The pods' {@code /tokenize} or render endpoints ({@code tokenizer.api}), behind the local
     * tokenizers of the models that name one.
     */
    private Tokenizer tokenizer() {
      Tokenizers.VllmTokenizer remote =
          Tokenizers.vllm()
              .api(settings.tokenizer().vllmApi())
              .timeout(settings.tokenizer().timeout())
              .meterRegistry(meterRegistry)
              .build();
      Map<String, RouterSettings.LocalTokenizer> local = settings.tokenizers();
      if (local.isEmpty()) {
        return remote;
      }
      TokenizerChain.Builder chain = Tokenizers.chain().remote(remote).meterRegistry(meterRegistry);
      for (Map.Entry<String, RouterSettings.LocalTokenizer> e : local.entrySet()) {
        String at = "models." + e.getKey() + ".tokenizer";
        chain.local(
            e.getKey(),
            LocalTokenizers.load(at, e.getKey(), e.getValue(), baseDirectory, meterRegistry),
            e.getValue().fallback());
      }
      return chain.build();
    }
  }
}
