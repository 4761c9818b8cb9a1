package io.kvroute.kubernetes;

import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.fabric8.kubernetes.client.informers.ResourceEventHandler;
import io.fabric8.kubernetes.client.informers.SharedIndexInformer;
import io.kvroute.connector.Endpoint;
import io.kvroute.kubernetes.internal.InferencePools;
import io.kvroute.kubernetes.internal.LoraAdapters;
import io.kvroute.kubernetes.internal.PodEndpoints;
import io.kvroute.kubernetes.internal.PodEndpoints.Target;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Endpoint discovery from the Kubernetes API: watches the pods of a namespace, chosen by a label
 * selector or by a Gateway API Inference Extension {@code InferencePool}, and applies the ready
 * ones to an {@link EndpointSink} (a {@link io.kvroute.router.KvRouter} through {@link
 * EndpointSink#of}).
 *
 * <pre>{@code
 * KubernetesDiscovery discovery =
 *     KubernetesDiscovery.builder(EndpointSink.of(router))
 *         .namespace("llm")
 *         .inferencePool("qwen-pool")        // or .selector(Map.of("app", "vllm"))
 *         .build()
 *         .start();
 * // ... on shutdown
 * discovery.close();
 * }</pre>
 *
 * <p>A pod is an endpoint while it has a pod IP, the condition {@code Ready=True} and no deletion
 * timestamp. Its id is the pod name ({@code <pod>-rank<r>} for each data-parallel rank when there
 * are several), its URL {@code http://<podIP>:<port>}, its labels the pod's, its role the value of
 * the role label ({@code llm-d.ai/role} by default: {@code prefill}, {@code decode} or {@code
 * both}; both when absent). Its KV events are subscribed at {@code tcp://<podIP>:<kvEventsPort +
 * r>}. A pod whose IP, role, labels or ports change is removed from the sink and added again.
 *
 * <p>Changes are watch-driven (fabric8 informers), so the sink follows a pod within a second; a
 * periodic resync re-applies the whole state as a safety net. Optionally ({@link
 * Builder#loraAdapters}) each endpoint's LoRA adapters are read from its {@code GET /v1/models}
 * into the label {@value #LORA_LABEL} that the scheduler's LoRA filter reads; the endpoint is added
 * once that first answer (or its failure) is in.
 *
 * <p>Thread-safe. The sink is called from the discovery's own thread only, one call at a time.
 * {@link #close} stops watching and leaves the sink as it is.
 *
 * <p>Meters: {@code kvroute.kubernetes.endpoints} (gauge), {@code kvroute.kubernetes.changes}
 * (counter, tag {@code kind}: added, removed, replaced), {@code kvroute.kubernetes.watch.errors}
 * (counter).
 */
public final class KubernetesDiscovery implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(KubernetesDiscovery.class);

  /** The default role label: llm-d's. */
  public static final String DEFAULT_ROLE_LABEL = "llm-d.ai/role";

  /** The label the LoRA adapters are written to (the scheduler's LoRA filter reads it). */
  public static final String LORA_LABEL = "kvroute.io/lora-adapters";

  /** The default HTTP port of a vLLM pod. */
  public static final int DEFAULT_PORT = 8000;

  /** The default port of vLLM's KV-event publisher (rank 0). */
  public static final int DEFAULT_KV_EVENTS_PORT = 5557;

  private final EndpointSink sink;
  private final KubernetesClient givenClient;
  private final String givenNamespace;
  private final Map<String, String> selector;
  private final String poolName;
  private final String poolApiVersion;
  private final String roleLabel;
  private final int port;
  private final int kvEventsPort;
  private final int dataParallelSize;
  private final boolean httpPortPerRank;
  private final boolean lora;
  private final Duration loraRefresh;
  private final Duration resyncPeriod;

  private final ScheduledExecutorService executor;
  private final Map<String, Target> applied = new ConcurrentHashMap<>();
  private final Set<String> rejected = new HashSet<>();
  private final AtomicBoolean pending = new AtomicBoolean();
  private final AtomicBoolean started = new AtomicBoolean();
  private final AtomicBoolean closing = new AtomicBoolean();
  private volatile boolean closed;
  private final Counter added;
  private final Counter removed;
  private final Counter replaced;
  private final Counter watchErrors;
  private final LoraAdapters loraAdapters;

  // Owned by the discovery thread (start() hands them over before the first task runs).
  private KubernetesClient client;
  private boolean ownsClient;
  private volatile String namespace;
  private SharedIndexInformer<GenericKubernetesResource> poolInformer;
  private volatile View view;

  /**
   * The pods followed now: their informer, the selector (null: none, as when the pool is missing),
   * the ports of each rank.
   */
  private record View(
      SharedIndexInformer<Pod> informer, Map<String, String> selector, List<Integer> ports) {}

  private KubernetesDiscovery(Builder b) {
    this.sink = b.sink;
    this.givenClient = b.client;
    this.givenNamespace = b.namespace;
    this.selector = b.selector == null ? null : Map.copyOf(b.selector);
    this.poolName = b.inferencePool;
    this.poolApiVersion = b.inferencePoolApiVersion;
    this.roleLabel = b.roleLabel;
    this.port = b.port;
    this.kvEventsPort = b.kvEventsPort;
    this.dataParallelSize = b.dataParallelSize;
    this.httpPortPerRank = b.httpPortPerRank;
    this.lora = b.loraAdapters;
    this.loraRefresh = b.loraRefresh;
    this.resyncPeriod = b.resyncPeriod;
    this.executor =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "kvroute-kubernetes");
              t.setDaemon(true);
              return t;
            });
    MeterRegistry registry = b.meterRegistry;
    Gauge.builder("kvroute.kubernetes.endpoints", applied, Map::size)
        .description("Endpoints discovery has applied to its sink")
        .register(registry);
    this.added = changes(registry, "added");
    this.removed = changes(registry, "removed");
    this.replaced = changes(registry, "replaced");
    this.watchErrors =
        Counter.builder("kvroute.kubernetes.watch.errors")
            .description("Errors of the Kubernetes list/watch calls (each is retried)")
            .register(registry);
    this.loraAdapters = lora ? new LoraAdapters(b.loraTimeout, executor) : null;
  }

  private static Counter changes(MeterRegistry registry, String kind) {
    return Counter.builder("kvroute.kubernetes.changes")
        .description("Endpoint changes applied to the sink")
        .tag("kind", kind)
        .register(registry);
  }

  /** A builder applying what it finds to {@code sink}. */
  public static Builder builder(EndpointSink sink) {
    return new Builder(sink);
  }

  /**
   * Starts watching, in the background: returns at once; the sink is filled as the first lists
   * arrive, and list or watch failures are retried (and counted).
   *
   * @return this
   * @throws IllegalStateException when started twice or after {@link #close}
   * @throws KubernetesClientException when no client was given and none can be configured
   */
  public KubernetesDiscovery start() {
    if (closed || !started.compareAndSet(false, true)) {
      throw new IllegalStateException("KubernetesDiscovery can be started once");
    }
    if (givenClient != null) {
      client = givenClient;
    } else {
      client = new KubernetesClientBuilder().build();
      ownsClient = true;
    }
    namespace =
        givenNamespace != null
            ? givenNamespace
            : client.getNamespace() != null ? client.getNamespace() : "default";
    executor.execute(this::startWatching);
    long resync = resyncPeriod.toMillis();
    executor.scheduleWithFixedDelay(this::reconcile, resync, resync, TimeUnit.MILLISECONDS);
    if (lora) {
      long every = loraRefresh.toMillis();
      executor.scheduleWithFixedDelay(this::refreshLora, every, every, TimeUnit.MILLISECONDS);
    }
    return this;
  }

  /** The endpoints applied to the sink now, by id. */
  public Map<String, Endpoint> endpoints() {
    Map<String, Endpoint> out = new TreeMap<>();
    applied.forEach((id, t) -> out.put(id, t.endpoint()));
    return out;
  }

  /** The namespace watched (known once {@link #start started}), or null before. */
  public String namespace() {
    return namespace != null ? namespace : givenNamespace;
  }

  /** Stops watching; the sink keeps the endpoints it has. Idempotent. */
  @Override
  public void close() {
    if (!closing.compareAndSet(false, true)) {
      return;
    }
    closed = true;
    try {
      executor.submit(this::stopWatching).get(10, TimeUnit.SECONDS);
    } catch (RejectedExecutionException | java.util.concurrent.ExecutionException e) {
      log.warn("kvroute-kubernetes: stopping: {}", e.toString());
    } catch (java.util.concurrent.TimeoutException e) {
      log.warn("kvroute-kubernetes: informers did not stop within 10s");
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    executor.shutdownNow();
    if (loraAdapters != null) {
      loraAdapters.close();
    }
  }

  // ------------------------------------------------------------------ on the discovery thread

  private void startWatching() {
    try {
      watch();
    } catch (RuntimeException e) {
      watchErrors.increment();
      log.error("kvroute-kubernetes: cannot watch namespace {}: {}", namespace, e.toString(), e);
    }
  }

  private void watch() {
    if (closed) {
      return;
    }
    if (poolName == null) {
      view = new View(podInformer(selector), selector, ports(List.of()));
      return;
    }
    String apiVersion = poolApiVersion != null ? poolApiVersion : probePoolApiVersion();
    log.info(
        "kvroute-kubernetes: following InferencePool {}/{} ({})", namespace, poolName, apiVersion);
    poolInformer =
        client
            .genericKubernetesResources(InferencePools.context(apiVersion))
            .inNamespace(namespace)
            .runnableInformer(resyncPeriod.toMillis());
    poolInformer.addEventHandler(handler(this::schedulePoolChange));
    poolInformer.exceptionHandler(this::watchError);
    poolInformer.start().thenRun(this::schedulePoolChange);
  }

  /** v1 when the cluster serves it (a list answers), else v1alpha2. */
  private String probePoolApiVersion() {
    try {
      client
          .genericKubernetesResources(InferencePools.context(InferencePools.V1))
          .inNamespace(namespace)
          .list();
      return InferencePools.V1;
    } catch (KubernetesClientException e) {
      if (e.getCode() == 404) {
        return InferencePools.V1ALPHA2;
      }
      watchErrors.increment();
      log.warn(
          "kvroute-kubernetes: listing InferencePools failed ({}); assuming {}",
          e.getMessage(),
          InferencePools.V1);
      return InferencePools.V1;
    }
  }

  private void schedulePoolChange() {
    try {
      executor.execute(this::poolChanged);
    } catch (RejectedExecutionException e) {
      // closed
    }
  }

  private void poolChanged() {
    try {
      applyPool();
    } catch (RuntimeException e) {
      log.warn(
          "kvroute-kubernetes: applying InferencePool {} failed: {}", poolName, e.toString(), e);
    }
  }

  private void applyPool() {
    if (closed || poolInformer == null || !poolInformer.hasSynced()) {
      return;
    }
    GenericKubernetesResource pool = null;
    for (GenericKubernetesResource r : poolInformer.getStore().list()) {
      if (r.getMetadata() != null && poolName.equals(r.getMetadata().getName())) {
        pool = r;
      }
    }
    View current = view;
    InferencePools.Spec spec = null;
    if (pool == null) {
      if (current == null || current.selector() != null) {
        log.warn("kvroute-kubernetes: InferencePool {}/{} not found", namespace, poolName);
      }
    } else {
      try {
        spec = InferencePools.spec(pool);
      } catch (IllegalArgumentException e) {
        log.warn(
            "kvroute-kubernetes: InferencePool {}/{}: {}", namespace, poolName, e.getMessage());
      }
    }
    // One informer over the namespace's pods, filtered by the pool's selector here: a change of
    // the selector moves pods in and out without a new list (as the inference extension's EPP).
    SharedIndexInformer<Pod> informer =
        current != null ? current.informer() : podInformer(Map.of());
    if (spec == null) {
      view = new View(informer, null, ports(List.of()));
    } else {
      if (current == null || !spec.selector().equals(current.selector())) {
        log.info("kvroute-kubernetes: InferencePool {} selects {}", poolName, spec.selector());
      }
      view = new View(informer, spec.selector(), ports(spec.ports()));
    }
    reconcile();
  }

  /** The HTTP port of each rank: a pool's target ports, or the port (+ r) of each rank. */
  private List<Integer> ports(List<Integer> poolPorts) {
    if (poolPorts.size() > 1) {
      return poolPorts;
    }
    int base = poolPorts.isEmpty() ? port : poolPorts.get(0);
    List<Integer> out = new ArrayList<>(dataParallelSize);
    for (int r = 0; r < dataParallelSize; r++) {
      out.add(httpPortPerRank ? base + r : base);
    }
    return out;
  }

  private SharedIndexInformer<Pod> podInformer(Map<String, String> labels) {
    SharedIndexInformer<Pod> informer =
        client
            .pods()
            .inNamespace(namespace)
            .withLabels(labels)
            .runnableInformer(resyncPeriod.toMillis());
    informer.addEventHandler(handler(this::scheduleReconcile));
    informer.exceptionHandler(this::watchError);
    informer.start().thenRun(this::scheduleReconcile);
    return informer;
  }

  private <T> ResourceEventHandler<T> handler(Runnable onChange) {
    return new ResourceEventHandler<>() {
      @Override
      public void onAdd(T obj) {
        onChange.run();
      }

      @Override
      public void onUpdate(T oldObj, T newObj) {
        onChange.run();
      }

      @Override
      public void onDelete(T obj, boolean deletedFinalStateUnknown) {
        onChange.run();
      }
    };
  }

  private boolean watchError(boolean isStarted, Throwable t) {
    if (closed) {
      return false;
    }
    watchErrors.increment();
    log.warn("kvroute-kubernetes: list/watch failed (retrying): {}", t.toString());
    return true;
  }

  private void scheduleReconcile() {
    if (pending.compareAndSet(false, true)) {
      try {
        executor.execute(this::reconcile);
      } catch (RejectedExecutionException e) {
        pending.set(false);
      }
    }
  }

  private void reconcile() {
    pending.set(false);
    View v = view;
    if (closed || v == null) {
      return;
    }
    try {
      Map<String, Target> desired = new LinkedHashMap<>();
      if (v.selector() != null) {
        if (!v.informer().hasSynced()) {
          return; // keep what is applied until the first list is in
        }
        PodEndpoints.Options o = new PodEndpoints.Options(roleLabel, v.ports(), kvEventsPort);
        for (Pod pod : v.informer().getStore().list()) {
          if (!PodEndpoints.matches(pod, v.selector()) || !PodEndpoints.ready(pod)) {
            continue;
          }
          for (Target t : PodEndpoints.targets(pod, o)) {
            if (loraAdapters != null) {
              String url = t.endpoint().baseUrl();
              var adapters = loraAdapters.adapters(url);
              if (adapters.isEmpty()) {
                loraAdapters.fetch(url, this::scheduleReconcile);
                continue; // added once the first answer is in
              }
              if (!adapters.get().isEmpty()) {
                t = t.withLabel(LORA_LABEL, adapters.get());
              }
            }
            desired.put(t.endpoint().id(), t);
          }
        }
      }
      apply(desired);
      if (loraAdapters != null) {
        List<String> keep = new ArrayList<>();
        if (v.selector() != null) {
          for (Pod pod : v.informer().getStore().list()) {
            if (PodEndpoints.matches(pod, v.selector()) && PodEndpoints.ready(pod)) {
              PodEndpoints.targets(
                      pod, new PodEndpoints.Options(roleLabel, v.ports(), kvEventsPort))
                  .forEach(t -> keep.add(t.endpoint().baseUrl()));
            }
          }
        }
        loraAdapters.retain(keep);
      }
    } catch (RuntimeException e) {
      log.warn("kvroute-kubernetes: applying the pods failed: {}", e.toString(), e);
    }
  }

  private void apply(Map<String, Target> desired) {
    Set<String> changed = new HashSet<>();
    for (String id : List.copyOf(applied.keySet())) {
      Target now = desired.get(id);
      if (now == null || !now.equals(applied.get(id))) {
        sink.remove(id);
        applied.remove(id);
        if (now == null) {
          removed.increment();
          log.info("kvroute-kubernetes: endpoint {} removed", id);
        } else {
          changed.add(id);
        }
      }
    }
    rejected.retainAll(desired.keySet());
    for (Map.Entry<String, Target> e : desired.entrySet()) {
      if (applied.containsKey(e.getKey())) {
        continue;
      }
      Target t = e.getValue();
      try {
        sink.add(t.endpoint(), t.events());
      } catch (IllegalArgumentException ex) {
        if (rejected.add(e.getKey())) {
          log.warn("kvroute-kubernetes: the sink rejected {}: {}", t.endpoint(), ex.getMessage());
        }
        continue;
      }
      rejected.remove(e.getKey());
      applied.put(e.getKey(), t);
      if (changed.contains(e.getKey())) {
        replaced.increment();
        log.info("kvroute-kubernetes: endpoint {} replaced by {}", e.getKey(), t.endpoint());
      } else {
        added.increment();
        log.info("kvroute-kubernetes: endpoint {} added at {}", e.getKey(), t.endpoint());
      }
    }
  }

  private void refreshLora() {
    if (closed || loraAdapters == null) {
      return;
    }
    for (String url : loraAdapters.known()) {
      loraAdapters.fetch(url, this::scheduleReconcile);
    }
  }

  private void stopWatching() {
    if (poolInformer != null) {
      poolInformer.stop();
    }
    View v = view;
    if (v != null) {
      v.informer().stop();
    }
    if (ownsClient) {
      client.close();
    }
  }

  /** Configures a {@link KubernetesDiscovery}; not thread-safe. */
  public static final class Builder {
    private final EndpointSink sink;
    private KubernetesClient client;
    private volatile String namespace;
    private Map<String, String> selector;
    private String inferencePool;
    private String inferencePoolApiVersion;
    private String roleLabel = DEFAULT_ROLE_LABEL;
    private int port = DEFAULT_PORT;
    private int kvEventsPort = DEFAULT_KV_EVENTS_PORT;
    private int dataParallelSize = 1;
    private boolean httpPortPerRank = true;
    private boolean loraAdapters;
    private Duration loraRefresh = Duration.ofSeconds(30);
    private Duration loraTimeout = Duration.ofSeconds(2);
    private Duration resyncPeriod = Duration.ofSeconds(30);
    private MeterRegistry meterRegistry = new SimpleMeterRegistry();

    private Builder(EndpointSink sink) {
      this.sink = Objects.requireNonNull(sink, "sink");
    }

    /**
     * The client (default: one configured from the environment: in-cluster service account, or
     * {@code ~/.kube/config}; created at {@link #start} and closed at {@link #close}). A given
     * client is not closed.
     */
    public Builder client(KubernetesClient client) {
      this.client = Objects.requireNonNull(client, "client");
      return this;
    }

    /** The namespace (default: the client's, else {@code default}). */
    public Builder namespace(String namespace) {
      this.namespace = namespace;
      return this;
    }

    /** Follows the pods with all these labels (exclusive with {@link #inferencePool}). */
    public Builder selector(Map<String, String> labels) {
      this.selector = labels == null ? null : new LinkedHashMap<>(labels);
      return this;
    }

    /**
     * Follows the pods an {@code InferencePool} of this name selects, on its target ports; a change
     * of the pool's selector moves pods in and out (exclusive with {@link #selector}).
     */
    public Builder inferencePool(String name) {
      this.inferencePool = name;
      return this;
    }

    /**
     * The pool's API, {@code inference.networking.k8s.io/v1} or {@code
     * inference.networking.x-k8s.io/v1alpha2} (default: v1 when the cluster serves it, else
     * v1alpha2).
     */
    public Builder inferencePoolApiVersion(String apiVersion) {
      this.inferencePoolApiVersion = apiVersion;
      return this;
    }

    /** The pod label naming the role (default {@value KubernetesDiscovery#DEFAULT_ROLE_LABEL}). */
    public Builder roleLabel(String label) {
      this.roleLabel = label;
      return this;
    }

    /** The HTTP port of rank 0 (default 8000; an InferencePool's target port wins). */
    public Builder port(int port) {
      this.port = port;
      return this;
    }

    /** The KV-event publisher port of rank 0 (default 5557; rank r uses + r); 0 for none. */
    public Builder kvEventsPort(int port) {
      this.kvEventsPort = port;
      return this;
    }

    /**
     * Data-parallel ranks per pod (default 1): each is an endpoint {@code <pod>-rank<r>}, with KV
     * events at {@code kvEventsPort + r} and HTTP at {@code port + r} (see {@link
     * #httpPortPerRank}). An InferencePool listing several target ports has one rank per port.
     */
    public Builder dataParallelSize(int size) {
      this.dataParallelSize = size;
      return this;
    }

    /**
     * Whether rank r serves HTTP at {@code port + r} (default true); false when every rank is
     * behind the pod's one HTTP port.
     */
    public Builder httpPortPerRank(boolean on) {
      this.httpPortPerRank = on;
      return this;
    }

    /**
     * Reads each endpoint's LoRA adapters from its {@code GET /v1/models} into the label {@value
     * KubernetesDiscovery#LORA_LABEL} (default off).
     */
    public Builder loraAdapters(boolean on) {
      this.loraAdapters = on;
      return this;
    }

    /** How often the LoRA adapters are read again (default 30s). */
    public Builder loraRefresh(Duration every) {
      this.loraRefresh = every;
      return this;
    }

    /** The timeout of one {@code /v1/models} call (default 2s). */
    public Builder loraTimeout(Duration timeout) {
      this.loraTimeout = timeout;
      return this;
    }

    /** How often the whole state is re-applied, as a safety net to the watches (default 30s). */
    public Builder resyncPeriod(Duration period) {
      this.resyncPeriod = period;
      return this;
    }

    /** Where the meters go (default a private {@link SimpleMeterRegistry}). */
    public Builder meterRegistry(MeterRegistry registry) {
      this.meterRegistry = Objects.requireNonNull(registry, "meterRegistry");
      return this;
    }

    /**
     * The discovery, not started.
     *
     * @throws IllegalArgumentException naming the field that is invalid
     */
    public KubernetesDiscovery build() {
      boolean hasSelector = selector != null && !selector.isEmpty();
      boolean hasPool = inferencePool != null && !inferencePool.isBlank();
      if (hasSelector == hasPool) {
        throw new IllegalArgumentException(
            "kubernetes discovery needs exactly one of selector (pod labels) and inferencePool");
      }
      if (namespace != null && namespace.isBlank()) {
        throw new IllegalArgumentException("kubernetes.namespace must not be blank");
      }
      if (hasSelector) {
        selector.forEach(
            (k, v) -> {
              if (k == null || k.isBlank() || v == null) {
                throw new IllegalArgumentException(
                    "kubernetes.selector needs non-blank keys and values, was " + selector);
              }
            });
      }
      if (inferencePoolApiVersion != null) {
        InferencePools.context(inferencePoolApiVersion);
      }
      if (roleLabel == null || roleLabel.isBlank()) {
        throw new IllegalArgumentException("kubernetes.roleLabel must not be blank");
      }
      if (port < 1 || port > 65535) {
        throw new IllegalArgumentException("kubernetes.port must be in 1..65535, was " + port);
      }
      if (dataParallelSize < 1 || dataParallelSize > 1024) {
        throw new IllegalArgumentException(
            "kubernetes.dataParallelSize must be in 1..1024, was " + dataParallelSize);
      }
      if (httpPortPerRank && port + dataParallelSize - 1 > 65535) {
        throw new IllegalArgumentException(
            "kubernetes.port + dataParallelSize - 1 must be <= 65535, was "
                + (port + dataParallelSize - 1));
      }
      if (kvEventsPort != 0 && (kvEventsPort < 1 || kvEventsPort + dataParallelSize - 1 > 65535)) {
        throw new IllegalArgumentException(
            "kubernetes.kvEventsPort must be 0 (none) or in 1..65535 for every rank, was "
                + kvEventsPort);
      }
      positive("resyncPeriod", resyncPeriod);
      positive("loraRefresh", loraRefresh);
      positive("loraTimeout", loraTimeout);
      return new KubernetesDiscovery(this);
    }

    private static void positive(String name, Duration d) {
      if (d == null || d.isNegative() || d.isZero()) {
        throw new IllegalArgumentException("kubernetes." + name + " must be > 0, was " + d);
      }
    }
  }
}
