package io.kvroute.testkit;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Consumer;

/**
 * A set of {@link VllmSimulator} pods serving one model: {@code prefill-i}, {@code decode-i} and
 * {@code pod-i} (role {@link SimRole#BOTH}), sharing one {@link SharedKvStore} when the protocol is
 * {@link KvTransferProtocol#SHARED_STORAGE}.
 *
 * <pre>{@code
 * try (SimulatedCluster c = SimulatedCluster.builder().prefill(1).decode(2)
 *     .protocol(KvTransferProtocol.NIXL)
 *     .configure(b -> b.latency(LatencyModel.ZERO)).build().start()) {
 *   URI decode = c.decodePods().get(0).baseUrl();
 * }
 * }</pre>
 *
 * <p>Thread-safe after {@link #start()}; the pod list never changes.
 */
public final class SimulatedCluster implements AutoCloseable {

  private final List<VllmSimulator> pods;
  private final SharedKvStore store;

  private SimulatedCluster(List<VllmSimulator> pods, SharedKvStore store) {
    this.pods = List.copyOf(pods);
    this.store = store;
  }

  /** A builder: no pods, model {@code sim-model}, protocol {@link KvTransferProtocol#NONE}. */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * Starts every pod (closing the started ones if one fails).
   *
   * @return this
   */
  public SimulatedCluster start() {
    try {
      for (VllmSimulator p : pods) {
        p.start();
      }
    } catch (RuntimeException e) {
      close();
      throw e;
    }
    return this;
  }

  /** Closes every pod. Idempotent. */
  @Override
  public void close() {
    for (VllmSimulator p : pods) {
      try {
        p.close();
      } catch (RuntimeException e) {
        // keep closing the others
      }
    }
  }

  /** All pods: prefill pods, then decode pods, then BOTH pods. */
  public List<VllmSimulator> pods() {
    return pods;
  }

  /** Pods with role {@link SimRole#PREFILL}. */
  public List<VllmSimulator> prefillPods() {
    return byRole(SimRole.PREFILL);
  }

  /** Pods with role {@link SimRole#DECODE}. */
  public List<VllmSimulator> decodePods() {
    return byRole(SimRole.DECODE);
  }

  /** Pods with role {@link SimRole#BOTH}. */
  public List<VllmSimulator> bothPods() {
    return byRole(SimRole.BOTH);
  }

  private List<VllmSimulator> byRole(SimRole role) {
    List<VllmSimulator> out = new ArrayList<>();
    for (VllmSimulator p : pods) {
      if (p.role() == role) {
        out.add(p);
      }
    }
    return List.copyOf(out);
  }

  /** The pod named {@code name}. */
  public Optional<VllmSimulator> pod(String name) {
    for (VllmSimulator p : pods) {
      if (p.name().equals(name)) {
        return Optional.of(p);
      }
    }
    return Optional.empty();
  }

  /** The shared store ({@link KvTransferProtocol#SHARED_STORAGE}), if any. */
  public Optional<SharedKvStore> sharedStore() {
    return Optional.ofNullable(store);
  }

  /** Resets every pod's stats. */
  public void resetStats() {
    pods.forEach(VllmSimulator::resetStats);
  }

  /** Clears every pod's faults. */
  public void resetFaults() {
    pods.forEach(p -> p.faults().reset());
  }

  /** One line per pod: name, role, HTTP URL, ZMQ endpoints. */
  public String describe() {
    StringBuilder sb = new StringBuilder();
    for (VllmSimulator p : pods) {
      sb.append(p.name())
          .append(" role=")
          .append(p.role().label())
          .append(" http=")
          .append(p.baseUrl())
          .append(" zmq_pub=")
          .append(p.eventsEndpoint())
          .append(" zmq_replay=")
          .append(p.replayEndpoint())
          .append(" topic=")
          .append(p.topic());
      if (p.bootstrapUrl() != null) {
        sb.append(" bootstrap=").append(p.bootstrapUrl());
      }
      sb.append('\n');
    }
    return sb.toString();
  }

  /** Validating builder of {@link SimulatedCluster}; not thread-safe. */
  public static final class Builder {
    private int prefill;
    private int decode;
    private int both;
    private String model = "sim-model";
    private KvTransferProtocol protocol = KvTransferProtocol.NONE;
    private int sharedStoreBlocks = 100_000;
    private Consumer<VllmSimulator.Builder> configure = b -> {};

    private Builder() {}

    /** Number of prefill pods (default 0). */
    public Builder prefill(int n) {
      this.prefill = n;
      return this;
    }

    /** Number of decode pods (default 0). */
    public Builder decode(int n) {
      this.decode = n;
      return this;
    }

    /** Number of aggregated ({@link SimRole#BOTH}) pods (default 0). */
    public Builder both(int n) {
      this.both = n;
      return this;
    }

    /** Model served by every pod (default {@code sim-model}). */
    public Builder model(String model) {
      this.model = Objects.requireNonNull(model, "model");
      return this;
    }

    /** KV-transfer protocol of every pod (default {@link KvTransferProtocol#NONE}). */
    public Builder protocol(KvTransferProtocol protocol) {
      this.protocol = Objects.requireNonNull(protocol, "protocol");
      return this;
    }

    /** Capacity of the shared store for {@link KvTransferProtocol#SHARED_STORAGE}. */
    public Builder sharedStoreBlocks(int blocks) {
      this.sharedStoreBlocks = blocks;
      return this;
    }

    /**
     * Customizes every pod's builder (block size, GPU blocks, latency, ...); called after the
     * cluster has set name, model, role, protocol and labels.
     */
    public Builder configure(Consumer<VllmSimulator.Builder> configure) {
      this.configure = Objects.requireNonNull(configure, "configure");
      return this;
    }

    /**
     * Builds the (not yet started) pods.
     *
     * @throws IllegalArgumentException if a count is negative or there are no pods
     */
    public SimulatedCluster build() {
      if (prefill < 0 || decode < 0 || both < 0) {
        throw new IllegalArgumentException(
            "cluster pod counts must be >= 0, were prefill="
                + prefill
                + ", decode="
                + decode
                + ", both="
                + both);
      }
      if (prefill + decode + both == 0) {
        throw new IllegalArgumentException("cluster must have at least one pod");
      }
      SharedKvStore store =
          protocol == KvTransferProtocol.SHARED_STORAGE
              ? SharedKvStore.create(sharedStoreBlocks)
              : null;
      List<VllmSimulator> pods = new ArrayList<>();
      add(pods, SimRole.PREFILL, prefill, "prefill-", store);
      add(pods, SimRole.DECODE, decode, "decode-", store);
      add(pods, SimRole.BOTH, both, "pod-", store);
      return new SimulatedCluster(pods, store);
    }

    private void add(
        List<VllmSimulator> pods, SimRole role, int n, String prefix, SharedKvStore store) {
      for (int i = 0; i < n; i++) {
        VllmSimulator.Builder b =
            VllmSimulator.builder()
                .name(prefix + i)
                .model(model)
                .role(role)
                .protocol(protocol)
                .label("llm-d.ai/role", role.label())
                .label("app", "vllm-sim");
        if (store != null) {
          b.sharedStore(store);
        }
        configure.accept(b);
        pods.add(b.build());
      }
    }
  }
}
