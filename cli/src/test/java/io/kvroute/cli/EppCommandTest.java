package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.config.core.v3.HeaderValueOption;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.fabric8.kubernetes.api.model.GenericKubernetesResourceBuilder;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.dsl.base.ResourceDefinitionContext;
import io.fabric8.kubernetes.client.server.mock.KubernetesCrudDispatcher;
import io.fabric8.kubernetes.client.server.mock.KubernetesMockServer;
import io.fabric8.mockwebserver.Context;
import io.grpc.ManagedChannel;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.StreamObserver;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.VllmSimulator;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** {@code kvroute epp --config FILE}: health and one ext_proc exchange over a real port. */
class EppCommandTest {

  @Test
  void servesHealthAndPicksAnEndpoint(@TempDir Path dir) throws Exception {
    try (VllmSimulator pod =
        VllmSimulator.builder()
            .name("pod-0")
            .model("m")
            .latency(LatencyModel.ZERO)
            .build()
            .start()) {
      Path cfg = dir.resolve("epp.yaml");
      Files.writeString(
          cfg,
          "index: { blockSize: 16 }\n"
              + "endpoints:\n  - { id: pod-0, url: \""
              + pod.baseUrl()
              + "\", role: both }\n",
          StandardCharsets.UTF_8);
      EppCommand cmd = new EppCommand();
      RunningCommand<EppCommand> epp =
          RunningCommand.start(
              cmd,
              () -> cmd.running,
              "--config",
              cfg.toString(),
              "--port",
              "0",
              "--metrics-port",
              "0");
      ManagedChannel ch =
          NettyChannelBuilder.forAddress("127.0.0.1", cmd.running.port()).usePlaintext().build();
      try {
        assertThat(
                HealthGrpc.newBlockingStub(ch)
                    .withDeadlineAfter(30, TimeUnit.SECONDS)
                    .check(HealthCheckRequest.newBuilder().setService("readiness").build())
                    .getStatus())
            .isEqualTo(HealthCheckResponse.ServingStatus.SERVING);

        assertThat(destination(ch)).isEqualTo(pod.hostPort());
        // the gRPC health service has no room for details: /readyz on the metrics port has them
        java.util.regex.Matcher m =
            java.util.regex.Pattern.compile("metrics on :(\\d+)").matcher(epp.out.toString());
        assertThat(m.find()).as(epp.out.toString()).isTrue();
        var ready = TestHttp.get("http://127.0.0.1:" + m.group(1) + "/readyz");
        assertThat(ready.statusCode()).isEqualTo(200);
        assertThat(ready.body()).startsWith("ready\n").contains("parity: ");
      } finally {
        ch.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
        cmd.shutdown();
      }
      assertThat(epp.exit.get(30, TimeUnit.SECONDS)).isZero();
      assertThat(epp.out.toString()).contains("kvroute epp (ext_proc) listening on 127.0.0.1:");
    }
  }

  @Test
  void aBadConfigurationIsAUsageError(@TempDir Path dir) throws Exception {
    Path cfg = dir.resolve("bad.yaml");
    Files.writeString(cfg, "endpoints:\n  - { url: 12 }\n", StandardCharsets.UTF_8);
    StringWriter err = new StringWriter();
    CommandLine cl = Main.commandLine();
    cl.setErr(new PrintWriter(err));
    assertThat(cl.execute("epp", "--config", cfg.toString())).isEqualTo(2);
    assertThat(err.toString()).contains("endpoints[0].url");
  }

  /**
   * One ext_proc exchange on {@code ch}: the headers and body of a completions request; the
   * destination the picker answers with ({@code x-gateway-destination-endpoint}).
   */
  private static String destination(ManagedChannel ch) throws Exception {
    LinkedBlockingQueue<ProcessingResponse> answers = new LinkedBlockingQueue<>();
    StreamObserver<ProcessingRequest> requests =
        ExternalProcessorGrpc.newStub(ch)
            .process(
                new StreamObserver<>() {
                  @Override
                  public void onNext(ProcessingResponse value) {
                    answers.add(value);
                  }

                  @Override
                  public void onError(Throwable t) {}

                  @Override
                  public void onCompleted() {}
                });
    requests.onNext(
        ProcessingRequest.newBuilder()
            .setRequestHeaders(
                HttpHeaders.newBuilder()
                    .setHeaders(
                        HeaderMap.newBuilder()
                            .addHeaders(header(":method", "POST"))
                            .addHeaders(header(":path", "/v1/completions"))))
            .build());
    requests.onNext(
        ProcessingRequest.newBuilder()
            .setRequestBody(
                HttpBody.newBuilder()
                    .setBody(ByteString.copyFromUtf8("{\"model\":\"m\",\"prompt\":\"hi\"}"))
                    .setEndOfStream(true))
            .build());
    ProcessingResponse headers = answers.poll(30, TimeUnit.SECONDS);
    requests.onCompleted();
    assertThat(headers).isNotNull();
    for (HeaderValueOption h :
        headers.getRequestHeaders().getResponse().getHeaderMutation().getSetHeadersList()) {
      if (h.getHeader().getKey().equals("x-gateway-destination-endpoint")) {
        return h.getHeader().getRawValue().toStringUtf8();
      }
    }
    throw new AssertionError("no destination in " + headers);
  }

  @Test
  void aConfigurationWithoutEndpointsOrDiscoveryIsRefused(@TempDir Path dir) throws Exception {
    Path cfg = dir.resolve("empty.yaml");
    Files.writeString(cfg, "observabilityHeaders: true\n", StandardCharsets.UTF_8);
    StringWriter err = new StringWriter();
    CommandLine cl = Main.commandLine();
    cl.setErr(new PrintWriter(err));
    assertThat(cl.execute("epp", "--config", cfg.toString())).isEqualTo(2);
    assertThat(err.toString())
        .contains("endpoints: lists no endpoint; every request would fail")
        .contains("add a discovery section")
        .doesNotContain("--admin");
  }

  /**
   * {@code discovery.kubernetes.inferencePool} and no static endpoint: a fabric8 mock API server
   * (CRUD mode, as kvroute-kubernetes' tests use it) holds an InferencePool and its pod, whose IP
   * and target port are a simulated vLLM pod on loopback; the picker sends Envoy there.
   */
  @Test
  void picksAmongThePodsOfAnInferencePool(@TempDir Path dir) throws Exception {
    KubernetesMockServer k8s =
        new KubernetesMockServer(
            new Context(),
            new io.fabric8.mockwebserver.MockWebServer(),
            new HashMap<>(),
            new KubernetesCrudDispatcher(),
            false);
    k8s.init();
    Map<String, String> saved = new HashMap<>();
    EppCommand cmd = new EppCommand();
    RunningCommand<EppCommand> epp = null;
    try (KubernetesClient client = k8s.createClient();
        VllmSimulator pod =
            VllmSimulator.builder()
                .name("vllm-0")
                .model("m")
                .latency(LatencyModel.ZERO)
                .build()
                .start()) {
      client
          .pods()
          .inNamespace("llm")
          .resource(
              new PodBuilder()
                  .withNewMetadata()
                  .withName("vllm-0")
                  .withLabels(Map.of("app", "qwen"))
                  .endMetadata()
                  .withNewStatus()
                  .withPodIP("127.0.0.1")
                  .addNewCondition()
                  .withType("Ready")
                  .withStatus("True")
                  .endCondition()
                  .endStatus()
                  .build())
          .create();
      client
          .genericKubernetesResources(
              new ResourceDefinitionContext.Builder()
                  .withGroup("inference.networking.k8s.io")
                  .withVersion("v1")
                  .withKind("InferencePool")
                  .withPlural("inferencepools")
                  .withNamespaced(true)
                  .build())
          .inNamespace("llm")
          .resource(
              new GenericKubernetesResourceBuilder()
                  .withApiVersion("inference.networking.k8s.io/v1")
                  .withKind("InferencePool")
                  .withNewMetadata()
                  .withName("qwen-pool")
                  .withNamespace("llm")
                  .endMetadata()
                  .withAdditionalProperties(
                      Map.of(
                          "spec",
                          Map.of(
                              "selector",
                              Map.of("matchLabels", Map.of("app", "qwen")),
                              "targetPorts",
                              List.of(Map.of("number", pod.baseUrl().getPort())))))
                  .build())
          .create();
      for (Map.Entry<String, String> e :
          Map.of(
                  "kubernetes.auth.tryKubeConfig", "false",
                  "kubernetes.auth.tryServiceAccount", "false",
                  "kubernetes.master", client.getMasterUrl().toString())
              .entrySet()) {
        saved.put(e.getKey(), System.getProperty(e.getKey()));
        System.setProperty(e.getKey(), e.getValue());
      }
      Path cfg = dir.resolve("epp.yaml");
      Files.writeString(
          cfg,
          "discovery:\n"
              + "  kubernetes: { namespace: llm, inferencePool: qwen-pool, kvEventsPort: 0 }\n",
          StandardCharsets.UTF_8);
      epp =
          RunningCommand.start(
              cmd,
              () -> cmd.running,
              "--config",
              cfg.toString(),
              "--port",
              "0",
              "--metrics-port",
              "0");
      assertThat(epp.out.toString())
          .contains("discovering pods in Kubernetes namespace llm (InferencePool qwen-pool)");
      ManagedChannel ch =
          NettyChannelBuilder.forAddress("127.0.0.1", cmd.running.port()).usePlaintext().build();
      try {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        String picked = null;
        while (picked == null) {
          try {
            picked = destination(ch);
          } catch (AssertionError notYet) {
            // the pod is not discovered yet: the picker answered 503 (no endpoints)
            assertThat(System.nanoTime())
                .as("the pool's pod was not discovered")
                .isLessThan(deadline);
            TimeUnit.MILLISECONDS.sleep(20);
          }
        }
        assertThat(picked).isEqualTo("127.0.0.1:" + pod.baseUrl().getPort());
      } finally {
        ch.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      }
    } finally {
      // The mock API server first (see GatewayKubernetesTest), then the picker and its discovery.
      k8s.destroy();
      if (epp != null) {
        epp.stop(cmd::shutdown);
      }
      saved.forEach(
          (k, v) -> {
            if (v == null) {
              System.clearProperty(k);
            } else {
              System.setProperty(k, v);
            }
          });
    }
  }

  private static HeaderValue header(String k, String v) {
    return HeaderValue.newBuilder().setKey(k).setRawValue(ByteString.copyFromUtf8(v)).build();
  }
}
