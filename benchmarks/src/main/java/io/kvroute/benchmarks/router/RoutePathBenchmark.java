package io.kvroute.benchmarks.router;

import io.kvroute.benchmarks.BenchmarkDefaults;
import io.kvroute.config.ConfigBinder;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.Leg;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.router.KvRouter;
import io.kvroute.router.RoutedResponse;
import io.kvroute.scoring.Scheduler;
import io.kvroute.scoring.SchedulerConfigLoader;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.TearDown;

/**
 * kvroute's own CPU on the request path, without a network: {@link KvRouter#route} of an OpenAI
 * completions request (the client body parsed, scheduled, run through the {@code nixl} connector
 * and the orchestrator, the answer relayed and its usage read) against an in-memory transport that
 * answers each leg at once with the bodies {@code side_by_side.sh}'s static engines send.
 *
 * <ul>
 *   <li>{@code mode=decode}: one decode endpoint, no prefill (one leg);
 *   <li>{@code mode=pd}: a prefill and a decode endpoint with {@code always-disagg-pd-decider} (two
 *       legs: the prefill answer parsed for its {@code kv_transfer_params} and usage).
 * </ul>
 *
 * <p>Run: {@code java -jar benchmarks/target/benchmarks.jar RoutePathBenchmark -f 1 -wi 3 -i 5}.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class RoutePathBenchmark extends BenchmarkDefaults {
  static final String PROMPT =
      "The quick brown fox jumps over the lazy dog while the cache keeps every block of this shared"
          + " prefix warm for the next request in the same session";
  static final byte[] PREFILL_ANSWER =
      ("{\"id\":\"cmpl-r\",\"object\":\"text_completion\",\"created\":1757500000,"
              + "\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"text\":\" tok0\","
              + "\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null,"
              + "\"prompt_logprobs\":null}],\"usage\":{\"prompt_tokens\":32,\"total_tokens\":33,"
              + "\"completion_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":16}},"
              + "\"kv_transfer_params\":{\"do_remote_prefill\":true,\"do_remote_decode\":false,"
              + "\"remote_block_ids\":[[1,2]],\"remote_engine_id\":\"e\",\"remote_request_id\":"
              + "\"r\",\"remote_host\":\"localhost\",\"remote_port\":5600,\"tp_size\":1}}")
          .getBytes(StandardCharsets.UTF_8);
  static final byte[] DECODE_ANSWER =
      ("{\"id\":\"cmpl-r\",\"object\":\"text_completion\",\"created\":1757500000,"
              + "\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"text\":\" tok0 tok1 tok2"
              + " tok3 tok4 tok5 tok6 tok7 tok8 tok9 tok10 tok11 tok12 tok13 tok14 tok15\","
              + "\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null,"
              + "\"prompt_logprobs\":null}],\"usage\":{\"prompt_tokens\":32,\"total_tokens\":48,"
              + "\"completion_tokens\":16,\"prompt_tokens_details\":{\"cached_tokens\":32}},"
              + "\"kv_transfer_params\":null}")
          .getBytes(StandardCharsets.UTF_8);
  static final Map<String, List<String>> JSON = Map.of("Content-Type", List.of("application/json"));

  /** Decode only (one leg) or always disaggregated (two legs). */
  @Param({"decode", "pd"})
  public String mode;

  private KvRouter router;
  private byte[] body;
  private Map<String, List<String>> headers;
  private long n;

  /** Builds the router over the in-memory pods. */
  @Setup(Level.Trial)
  public void setUp() {
    boolean pd = mode.equals("pd");
    KvRouter.Builder b =
        KvRouter.builder()
            .transport(new InMemoryPods())
            .defaultConnector(ConnectorConfig.of("nixl"))
            .scheduler(scheduler(pd))
            .endpoint(Endpoint.of("http://127.0.0.1:18102", Endpoint.Role.DECODE).withId("d0"));
    if (pd) {
      b.endpoint(Endpoint.of("http://127.0.0.1:18101", Endpoint.Role.PREFILL).withId("p0"));
    }
    router = b.build();
    body =
        ("{\"model\":\"Qwen/Qwen3-8B\",\"prompt\":\""
                + PROMPT
                + "\",\"max_tokens\":16,\"temperature\":0}")
            .getBytes(StandardCharsets.UTF_8);
    headers = Map.of("Content-Type", List.of("application/json"));
  }

  /** Closes the router. */
  @TearDown(Level.Trial)
  public void tearDown() {
    router.close();
  }

  /** One routed request, its answer read to the end. */
  @Benchmark
  public byte[] route() throws Exception {
    InferenceRequest r =
        InferenceRequest.of(
            InferenceRequest.Api.COMPLETIONS, body, headers, "bench-" + Long.toHexString(n++));
    RoutedResponse resp = router.route(r).get(10, TimeUnit.SECONDS);
    return resp.readAll(1 << 20).get(10, TimeUnit.SECONDS);
  }

  private static Scheduler scheduler(boolean pd) {
    if (!pd) {
      Scheduler.Builder sb = Scheduler.builder();
      Scheduler.defaultProfiles(false).forEach(sb::profile);
      return sb.prefillProfile(Scheduler.PREFILL_PROFILE).build();
    }
    String yaml =
        String.join(
            "\n",
            "apiVersion: llm-d.ai/v1alpha1",
            "kind: EndpointPickerConfig",
            "plugins:",
            "- type: decode-filter",
            "- type: prefill-filter",
            "- type: prefix-cache-scorer",
            "- type: queue-scorer",
            "- {name: pick3, type: max-score-picker, parameters: {maxNumOfEndpoints: 3}}",
            "- {name: pick2, type: max-score-picker, parameters: {maxNumOfEndpoints: 2}}",
            "- type: always-disagg-pd-decider",
            "- type: disagg-profile-handler",
            "  parameters:",
            "    profiles: {decode: decode, prefill: prefill}",
            "    deciders: {prefill: always-disagg-pd-decider}",
            "schedulingProfiles:",
            "- name: decode",
            "  plugins:",
            "  - pluginRef: decode-filter",
            "  - {pluginRef: prefix-cache-scorer, weight: 3}",
            "  - {pluginRef: queue-scorer, weight: 2}",
            "  - pluginRef: pick3",
            "- name: prefill",
            "  plugins:",
            "  - pluginRef: prefill-filter",
            "  - {pluginRef: prefix-cache-scorer, weight: 3}",
            "  - {pluginRef: queue-scorer, weight: 2}",
            "  - pluginRef: pick2",
            "");
    @SuppressWarnings("unchecked")
    Map<String, Object> mapping = ConfigBinder.create().readYaml(yaml, Map.class);
    return SchedulerConfigLoader.create().load(mapping, "scheduler").pdEnabled(true).build();
  }

  /** Answers each leg at once: prefill legs with a NIXL prefill answer, decode legs in JSON. */
  static final class InMemoryPods implements HttpTransport {
    @Override
    public CompletableFuture<StreamingResponse> send(Outbound request) {
      byte[] answer = request.leg() == Leg.PREFILL ? PREFILL_ANSWER : DECODE_ANSWER;
      return CompletableFuture.completedFuture(StreamingResponse.of(200, JSON, answer));
    }

    @Override
    public void close() {}
  }
}
