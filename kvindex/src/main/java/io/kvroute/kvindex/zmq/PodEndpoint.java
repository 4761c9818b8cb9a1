package io.kvroute.kvindex.zmq;

import java.util.Objects;

/**
 * Where one pod publishes its KV events: the PUB endpoint the subscriber connects to, the optional
 * ROUTER replay endpoint, and the number of data-parallel ranks.
 *
 * <p><b>Data-parallel ranks.</b> With {@code dataParallelSize} n, rank r publishes on the
 * endpoint's port + r (replay likewise; vLLM's {@code offset_endpoint_port}), and its events are
 * indexed under the identity {@link #identity(String, int)}: the pod id itself for rank 0, {@code
 * "<podId>@dp<r>"} for r &gt; 0. The same rule names ranks in bound mode.
 *
 * <p>Immutable; thread-safe.
 *
 * @param podId the pod id (the index's pod key for rank 0)
 * @param endpoint PUB endpoint to connect to, e.g. {@code tcp://10.0.0.7:5557}
 * @param replayEndpoint ROUTER replay endpoint, or {@code null} (replay off, as vLLM's default)
 * @param dataParallelSize number of DP ranks (≥ 1)
 */
public record PodEndpoint(
    String podId, String endpoint, String replayEndpoint, int dataParallelSize) {

  /** Validates. */
  public PodEndpoint {
    if (podId == null || podId.isEmpty()) {
      throw new IllegalArgumentException("podEndpoint.podId must be non-empty");
    }
    if (endpoint == null || endpoint.isEmpty()) {
      throw new IllegalArgumentException("podEndpoint.endpoint must be non-empty");
    }
    checkZmq("podEndpoint.endpoint", endpoint);
    if (replayEndpoint != null) {
      checkZmq("podEndpoint.replayEndpoint", replayEndpoint);
    }
    if (dataParallelSize < 1) {
      throw new IllegalArgumentException(
          "podEndpoint.dataParallelSize must be >= 1, was " + dataParallelSize);
    }
  }

  /** ZMQ transports a subscriber can connect with. */
  private static void checkZmq(String field, String endpoint) {
    if (!(endpoint.startsWith("tcp://")
        || endpoint.startsWith("ipc://")
        || endpoint.startsWith("inproc://"))) {
      throw new IllegalArgumentException(
          field + " must be a tcp://, ipc:// or inproc:// ZMQ endpoint, was \"" + endpoint + "\"");
    }
  }

  /** A pod without replay and without data parallelism. */
  public static PodEndpoint of(String podId, String endpoint) {
    return new PodEndpoint(podId, endpoint, null, 1);
  }

  /** The same pod with a replay endpoint. */
  public PodEndpoint withReplay(String replayEndpoint) {
    return new PodEndpoint(podId, endpoint, replayEndpoint, dataParallelSize);
  }

  /** The same pod with {@code n} data-parallel ranks. */
  public PodEndpoint withDataParallelSize(int n) {
    return new PodEndpoint(podId, endpoint, replayEndpoint, n);
  }

  /**
   * The index identity of DP rank {@code rank} of {@code podId}: {@code podId} or {@code
   * podId@dp<rank>}.
   */
  public static String identity(String podId, int rank) {
    Objects.requireNonNull(podId, "podId");
    return rank == 0 ? podId : podId + "@dp" + rank;
  }

  /**
   * The pod id carried in a topic, llm-d's convention: {@code kv@<pod>@<model>} gives {@code
   * <pod>}; any other topic is the pod id as a whole.
   */
  public static String podIdFromTopic(String topic) {
    String[] parts = topic.split("@", -1);
    return parts.length == 3 ? parts[1] : topic;
  }
}
