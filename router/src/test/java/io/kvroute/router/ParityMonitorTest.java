package io.kvroute.router;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.hash.HashAlgorithm;
import io.kvroute.kvindex.parity.HashSettings;
import io.kvroute.kvindex.parity.ParityDiagnosis;
import io.kvroute.kvindex.zmq.KvEventListener;
import io.kvroute.scoring.BlockIndexLookup;
import io.kvroute.scoring.Scheduler;
import io.kvroute.scoring.Tokenizer;
import io.kvroute.scoring.Tokenizers;
import io.kvroute.testkit.EngineTokenizer;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The router's parity check against simulated vLLM pods with real HTTP and real ZMQ KV events: pods
 * misconfigured each way a deployment goes wrong (block size, {@code PYTHONHASHSEED}, hash
 * algorithm, a chat template that differs from the tokenizer endpoint's) are reported within 100
 * requests by a metric, a WARN (its listener) and a readiness line naming the cause, and their
 * model is routed with approximate scoring; pods configured right keep parity at or above 0.99.
 *
 * <p>Requests are sent one at a time and each waits for its sample to be judged (a condition with a
 * deadline), so the count of requests before the verdict does not depend on the machine's speed.
 */
class ParityMonitorTest {
  private static final String MODEL = SimulatedFleet.MODEL;

  private SimulatedCluster cluster;
  private KvRouter router;
  private ParityMonitor parity;
  private final SimpleMeterRegistry meters = new SimpleMeterRegistry();
  private final List<ParityStatus> failed = new CopyOnWriteArrayList<>();
  private final List<ParityStatus> restored = new CopyOnWriteArrayList<>();

  @AfterEach
  void stop() {
    if (router != null) {
      router.close();
    }
    if (cluster != null) {
      cluster.close();
    }
  }

  /**
   * Two pods configured by {@code pod}, a router expecting {@code expected}, tokenizing with {@code
   * tokenizer}, with a parity check that waits {@code grace} for events after an answer.
   */
  private void start(
      UnaryOperator<VllmSimulator.Builder> pod,
      HashSettings expected,
      Tokenizer tokenizer,
      Duration grace) {
    cluster =
        SimulatedCluster.builder()
            .both(2)
            .model(MODEL)
            .configure(b -> pod.apply(b.gpuBlocks(4096).latency(LatencyModel.ZERO)))
            .build()
            .start();
    BlockIndex index = BlockIndex.inMemory(SimulatedFleet.indexConfig());
    parity =
        ParityMonitor.builder(expected)
            .grace(grace)
            .meterRegistry(meters)
            .listener(
                new ParityMonitor.Listener() {
                  @Override
                  public void failed(ParityStatus status) {
                    failed.add(status);
                  }

                  @Override
                  public void restored(ParityStatus status) {
                    restored.add(status);
                  }
                })
            .build();
    Scheduler.Builder sb =
        Scheduler.builder().prefixCacheLookup(BlockIndexLookup.of(index)).tokenizer(tokenizer);
    Scheduler.defaultProfiles(true).forEach(sb::profile);
    KvEventFeed feed =
        KvEventFeeds.zmq(
            KvEventFeeds.subscriberFor(index)
                .listener(parity.eventListener(KvEventListener.NONE))
                .build(),
            index);
    router =
        SimulatedFleet.withPods(
                KvRouter.builder()
                    .scheduler(sb.build())
                    .eventFeed(feed)
                    .parity(parity)
                    .meterRegistry(meters),
                cluster)
            .build();
  }

  private static HashSettings vllmDefaults() {
    return HashSettings.of(HashAlgorithm.SHA256, 16, null);
  }

  /** A chat turn whose system prompt is shared by groups of four requests. */
  private static InferenceRequest chat(int i) {
    String system = ("You are assistant number " + (i / 4) + " of the parity test. ").repeat(8);
    String body =
        "{\"model\":\""
            + MODEL
            + "\",\"max_tokens\":4,\"messages\":[{\"role\":\"system\",\"content\":\""
            + system
            + "\"},{\"role\":\"user\",\"content\":\"question "
            + i
            + " about blocks and hashes and caches\"}]}";
    return InferenceRequest.of(
        InferenceRequest.Api.CHAT_COMPLETIONS,
        body.getBytes(StandardCharsets.UTF_8),
        Map.of(),
        "parity-" + i);
  }

  /** Routes request {@code i}, reads the answer, and waits until its sample (if any) is judged. */
  private RouteDecision routeAndJudge(int i) throws Exception {
    RoutedResponse r = router.route(chat(i)).get(20, TimeUnit.SECONDS);
    r.readAll(1 << 20).get(20, TimeUnit.SECONDS);
    RouteDecision rd = r.decision();
    ParityMonitor.Sample s = rd.paritySample;
    if (s != null) {
      await(s::judged, "sample of request " + i + " judged");
    }
    return rd;
  }

  private static void await(BooleanSupplier condition, String what) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (!condition.getAsBoolean()) {
      assertThat(System.nanoTime()).as(what).isLessThan(deadline);
      TimeUnit.MILLISECONDS.sleep(2); // polling a condition
    }
  }

  /**
   * Sends requests until the model's parity fails; returns how many it took, asserting the report:
   * the WARN's listener, the failure meter, the degraded gauge, the readiness line and the cause.
   */
  private int requestsUntilFailed(ParityDiagnosis.Cause cause) throws Exception {
    int sent = 0;
    while (failed.isEmpty()) {
      assertThat(sent).as("parity reported within 100 requests").isLessThan(100);
      routeAndJudge(sent++);
    }
    ParityStatus s = failed.get(0);
    assertThat(s.model()).isEqualTo(MODEL);
    assertThat(s.state()).isEqualTo(ParityStatus.State.FAILED);
    assertThat(s.degraded()).isTrue();
    assertThat(s.diagnosis()).isPresent();
    assertThat(s.diagnosis().get().cause()).as(s.describe()).isEqualTo(cause);
    Counter c =
        meters
            .find("kvroute.routing.parity.failures")
            .tag("model", MODEL)
            .tag("cause", cause.name().toLowerCase(java.util.Locale.ROOT))
            .counter();
    assertThat(c).isNotNull();
    assertThat(c.count()).isEqualTo(1.0);
    Gauge degraded = meters.find("kvroute.routing.parity.degraded").tag("model", MODEL).gauge();
    assertThat(degraded.value()).isEqualTo(1.0);
    assertThat(parity.degraded(MODEL)).isTrue();
    assertThat(String.join("\n", parity.readiness())).contains("failed", cause.name(), MODEL);
    // the next request of the model is scored without the precise index
    RouteDecision next = routeAndJudge(sent);
    assertThat(next.scheduling().request().preciseScoring()).isFalse();
    assertThat(failed).hasSize(1); // one WARN, not one per request
    return sent;
  }

  @Test
  void aBlockSizeThatDiffersIsReported() throws Exception {
    start(
        b -> b.blockSize(32), vllmDefaults(), SimulatedFleet::tokenizeChat, Duration.ofMillis(200));
    assertThat(requestsUntilFailed(ParityDiagnosis.Cause.BLOCK_SIZE)).isLessThan(100);
    assertThat(failed.get(0).diagnosis().get().message()).contains("block_size 32");
  }

  @Test
  void aHashSeedThatDiffersIsReported() throws Exception {
    start(
        b -> b.hashSeed("42"),
        vllmDefaults(),
        SimulatedFleet::tokenizeChat,
        Duration.ofMillis(200));
    assertThat(requestsUntilFailed(ParityDiagnosis.Cause.HASH_SEED)).isLessThan(100);
    assertThat(failed.get(0).diagnosis().get().message()).contains("PYTHONHASHSEED=42");
  }

  @Test
  void aHashAlgorithmThatDiffersIsReported() throws Exception {
    start(
        b -> b.hashAlgorithm(HashAlgorithm.SHA256_CBOR),
        vllmDefaults(),
        SimulatedFleet::tokenizeChat,
        Duration.ofMillis(200));
    assertThat(requestsUntilFailed(ParityDiagnosis.Cause.HASH_ALGORITHM)).isLessThan(100);
    assertThat(failed.get(0).diagnosis().get().message()).contains("sha256_cbor");
  }

  /**
   * The pods' {@code /tokenize} renders chats with another template than generation does (a BOS
   * token added twice): kvroute, tokenizing through {@code /tokenize}, predicts blocks the engines
   * never store. Fixing the template brings parity, and precise routing, back.
   */
  @Test
  void aChatTemplateThatDiffersIsReportedAndAFixIsNoticed() throws Exception {
    AtomicBoolean broken = new AtomicBoolean(true);
    start(
        b -> b.endpointTokenizer(new DoubleBos(broken)),
        vllmDefaults(),
        Tokenizers.vllm().build(),
        Duration.ofMillis(200));
    assertThat(requestsUntilFailed(ParityDiagnosis.Cause.TOKENS)).isLessThan(100);
    assertThat(failed.get(0).diagnosis().get().fix()).contains("chat template");

    broken.set(false);
    int sent = 1000;
    while (restored.isEmpty()) {
      assertThat(sent).as("parity back within 100 requests").isLessThan(1100);
      routeAndJudge(sent++);
    }
    assertThat(parity.degraded(MODEL)).isFalse();
    assertThat(parity.model(MODEL).get().state()).isEqualTo(ParityStatus.State.OK);
    assertThat(routeAndJudge(sent).scheduling().request().preciseScoring()).isTrue();
    assertThat(meters.find("kvroute.routing.parity.degraded").tag("model", MODEL).gauge().value())
        .isZero();
  }

  @Test
  void podsConfiguredRightKeepParity() throws Exception {
    start(b -> b, vllmDefaults(), SimulatedFleet::tokenizeChat, Duration.ofSeconds(1));
    for (int i = 0; i < 100; i++) {
      routeAndJudge(i);
    }
    ParityStatus s = parity.model(MODEL).orElseThrow();
    assertThat(failed).isEmpty();
    assertThat(s.state()).as(s.describe()).isEqualTo(ParityStatus.State.OK);
    assertThat(s.ratio()).as(s.describe()).isGreaterThanOrEqualTo(0.99);
    assertThat(s.degraded()).isFalse();
    double checked =
        meters.find("kvroute.routing.parity.samples").tag("outcome", "checked").counter().count();
    assertThat(checked).isGreaterThanOrEqualTo(50);
    assertThat(meters.find("kvroute.routing.parity.blocks").tag("result", "missing").counter())
        .satisfies(c -> assertThat(c.count()).isLessThanOrEqualTo(checked * 0.01 * 8));
    assertThat(String.join("\n", parity.readiness())).contains("(ok)");
  }

  /** With degrading off, a failure is reported and the model keeps its precise scoring. */
  @Test
  void degradingCanBeTurnedOff() throws Exception {
    cluster =
        SimulatedCluster.builder()
            .both(1)
            .model(MODEL)
            .configure(b -> b.hashSeed("42").latency(LatencyModel.ZERO))
            .build()
            .start();
    BlockIndex index = BlockIndex.inMemory(SimulatedFleet.indexConfig());
    parity =
        ParityMonitor.builder(vllmDefaults())
            .grace(Duration.ofMillis(100))
            .degrade(false)
            .minSamples(3)
            .listener(
                new ParityMonitor.Listener() {
                  @Override
                  public void failed(ParityStatus status) {
                    failed.add(status);
                  }
                })
            .build();
    Scheduler.Builder sb =
        Scheduler.builder()
            .prefixCacheLookup(BlockIndexLookup.of(index))
            .tokenizer(SimulatedFleet::tokenizeChat);
    Scheduler.defaultProfiles(true).forEach(sb::profile);
    router =
        SimulatedFleet.withPods(
                KvRouter.builder()
                    .scheduler(sb.build())
                    .parity(parity)
                    .eventFeed(
                        KvEventFeeds.zmq(
                            KvEventFeeds.subscriberFor(index)
                                .listener(parity.eventListener(KvEventListener.NONE))
                                .build(),
                            index)),
                cluster)
            .build();
    int sent = 0;
    while (failed.isEmpty()) {
      assertThat(sent).isLessThan(100);
      routeAndJudge(sent++);
    }
    assertThat(failed.get(0).degraded()).isFalse();
    assertThat(parity.degraded(MODEL)).isFalse();
    assertThat(routeAndJudge(sent).scheduling().request().preciseScoring()).isTrue();
    assertThat(failed.get(0).describe()).contains("still routed precisely");
  }

  @Test
  void unpredictableSettingsAndBadOptionsAreRefused() {
    assertThatThrownBy(() -> ParityMonitor.builder(HashSettings.of(HashAlgorithm.XXHASH, 16, null)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("PYTHONHASHSEED");
    assertThatThrownBy(() -> ParityMonitor.builder(vllmDefaults()).threshold(0).build())
        .hasMessageContaining("parity.threshold");
    assertThatThrownBy(() -> ParityMonitor.builder(vllmDefaults()).minSamples(100).build())
        .hasMessageContaining("parity.minSamples");
    assertThatThrownBy(() -> ParityMonitor.builder(vllmDefaults()).samplesPerSecond(0).build())
        .hasMessageContaining("parity.samplesPerSecond");
  }

  /** A tokenizer endpoint whose chat template adds a second BOS token while {@code broken}. */
  private static final class DoubleBos implements EngineTokenizer {
    private final AtomicBoolean broken;

    DoubleBos(AtomicBoolean broken) {
      this.broken = broken;
    }

    @Override
    public int[] encodePrompt(String prompt) {
      return EngineTokenizer.simulated().encodePrompt(prompt);
    }

    @Override
    public int[] encodeChat(JsonNode request) {
      int[] ids = EngineTokenizer.simulated().encodeChat(request);
      if (!broken.get()) {
        return ids;
      }
      int[] out = new int[ids.length + 1];
      out[0] = ids.length == 0 ? 1 : ids[0];
      System.arraycopy(ids, 0, out, 1, ids.length);
      return out;
    }

    @Override
    public int[] encodeText(String text) {
      return EngineTokenizer.simulated().encodeText(text);
    }
  }
}
