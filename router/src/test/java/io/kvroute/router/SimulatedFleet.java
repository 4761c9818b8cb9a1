package io.kvroute.router;

import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.scoring.BlockIndexLookup;
import io.kvroute.scoring.Scheduler;
import io.kvroute.scoring.SchedulingRequest;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.SimTokenizer;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * The simulated fleet the router's end-to-end tests run on: three vLLM pods of {@link #MODEL} with
 * 16-token blocks that answer at once, routers that score them by a KV-block index, and the
 * requests sent to them.
 */
final class SimulatedFleet {
  static final String MODEL = "sim-model";

  private SimulatedFleet() {}

  /** Starts three pods that serve both roles. */
  static SimulatedCluster start() {
    return SimulatedCluster.builder()
        .both(3)
        .model(MODEL)
        .configure(b -> b.blockSize(16).gpuBlocks(1024).latency(LatencyModel.ZERO))
        .build()
        .start();
  }

  /** The index configuration matching the pods. */
  static IndexConfig indexConfig() {
    return IndexConfig.builder().blockSize(16).modelName(MODEL).build();
  }

  /**
   * A router builder with observability headers whose scheduler scores by {@code index}, with the
   * default profiles and the simulator's tokenizer; no pods or event feed yet.
   */
  static KvRouter.Builder routerOver(BlockIndex index) {
    Scheduler.Builder sb =
        Scheduler.builder()
            .prefixCacheLookup(BlockIndexLookup.of(index))
            .tokenizer(SimulatedFleet::tokenize);
    Scheduler.defaultProfiles(true).forEach(sb::profile);
    return KvRouter.builder().scheduler(sb.build()).observabilityHeaders(true);
  }

  /** The feed that keeps {@code index} up to date from the pods' ZMQ KV events. */
  static KvEventFeed eventsInto(BlockIndex index) {
    return KvEventFeeds.zmq(KvEventFeeds.subscriberFor(index).build(), index);
  }

  /** Adds every pod of {@code cluster} to {@code rb}, with its event source. */
  static KvRouter.Builder withPods(KvRouter.Builder rb, SimulatedCluster cluster) {
    for (VllmSimulator pod : cluster.pods()) {
      rb.endpoint(endpoint(pod), source(pod));
    }
    return rb;
  }

  /** {@code pod} as an endpoint for both roles. */
  static Endpoint endpoint(VllmSimulator pod) {
    return Endpoint.builder(pod.name(), pod.baseUrl().getHost(), pod.baseUrl().getPort()).build();
  }

  /** Where {@code pod} publishes its KV events. */
  static KvEventFeed.Source source(VllmSimulator pod) {
    return new KvEventFeed.Source(pod.eventsEndpoint(), pod.replayEndpoint(), pod.topic());
  }

  /** The simulator's tokenization of the request's prompt. */
  static CompletableFuture<int[]> tokenize(SchedulingRequest r) {
    return CompletableFuture.completedFuture(SimTokenizer.get().encode(r.prompt().orElse("")));
  }

  /** The simulator's chat template and tokenization of the request's messages, in process. */
  static CompletableFuture<int[]> tokenizeChat(SchedulingRequest r) {
    if (r.messages().isEmpty()) {
      return tokenize(r);
    }
    com.fasterxml.jackson.databind.node.ArrayNode arr =
        com.fasterxml.jackson.databind.node.JsonNodeFactory.instance.arrayNode();
    for (SchedulingRequest.ChatMessage m : r.messages().get()) {
      arr.addObject().put("role", m.role()).put("content", m.content());
    }
    SimTokenizer tok = SimTokenizer.get();
    return CompletableFuture.completedFuture(tok.encode(tok.applyChatTemplate(arr, true)));
  }

  /** A four-token completion of {@code prompt} for {@link #MODEL}, its id from the prompt. */
  static InferenceRequest completion(String prompt) {
    return InferenceRequest.of(
        InferenceRequest.Api.COMPLETIONS,
        ("{\"model\":\"" + MODEL + "\",\"prompt\":\"" + prompt + "\",\"max_tokens\":4}")
            .getBytes(StandardCharsets.UTF_8),
        Map.of(),
        "id-" + prompt.hashCode());
  }
}
