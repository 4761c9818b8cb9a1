package io.kvroute.examples;

import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.router.KvEventFeed;
import io.kvroute.router.KvEventFeeds;
import io.kvroute.router.KvRouter;
import io.kvroute.router.RoutedResponse;
import io.kvroute.scoring.BlockIndexLookup;
import io.kvroute.scoring.Scheduler;
import io.kvroute.scoring.Tokenizers;
import java.net.URI;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;

/**
 * The embedding shown in the README, verbatim: a {@link KvRouter} for one model that scores pods by
 * the prefix cache they report over vLLM's KV events, runs prefill and decode through the NIXL
 * connector, and streams the decode pod's answer back. {@code EmbeddingTest} runs it against the
 * testkit's simulated pods, and checks that the README still shows exactly this code.
 */
public final class Embedding {
  private Embedding() {}

  // README:begin
  /** A model server: HTTP base URL, role, and its vLLM KV-event publisher (ZMQ PUB) and replay. */
  public record Pod(String id, URI url, Endpoint.Role role, String kvEvents, String kvReplay) {}

  /** A router for one model; {@code close()} it on shutdown (it drains requests in flight). */
  public static KvRouter router(String model, List<Pod> pods) {
    BlockIndex index =
        BlockIndex.inMemory(IndexConfig.builder().blockSize(16).modelName(model).build());
    Scheduler.Builder scheduler =
        Scheduler.builder()
            .prefixCacheLookup(BlockIndexLookup.of(index)) // precise prefix-cache scores
            .tokenizer(Tokenizers.vllm().build()) // the pods' own /tokenize
            .pdEnabled(true); // prefill + decode when enough of the prompt is uncached
    Scheduler.defaultProfiles(true).forEach(scheduler::profile);
    KvRouter.Builder router =
        KvRouter.builder()
            .scheduler(scheduler.build())
            .model(model, ConnectorConfig.of("nixl")) // vLLM's NixlConnector protocol
            .eventFeed(KvEventFeeds.zmq(KvEventFeeds.subscriberFor(index).build(), index));
    for (Pod p : pods) {
      Endpoint e =
          new Endpoint(p.id(), "http", p.url().getHost(), p.url().getPort(), p.role(), Map.of());
      router.endpoint(e, new KvEventFeed.Source(p.kvEvents(), p.kvReplay(), ""));
    }
    return router.build();
  }

  /**
   * Routes one OpenAI chat request. The response is a {@code Flow.Publisher<ByteBuffer>} of the
   * decode pod's bytes (SSE when the body asks to stream); cancelling its subscription aborts both
   * legs.
   */
  public static CompletableFuture<RoutedResponse> chat(
      KvRouter router, byte[] body, Map<String, List<String>> headers) {
    InferenceRequest request =
        InferenceRequest.of(
            InferenceRequest.Api.CHAT_COMPLETIONS, body, headers, UUID.randomUUID().toString());
    return router.route(request);
  }
  // README:end
}
