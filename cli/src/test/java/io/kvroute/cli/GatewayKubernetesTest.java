package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.server.mock.KubernetesCrudDispatcher;
import io.fabric8.kubernetes.client.server.mock.KubernetesMockServer;
import io.fabric8.mockwebserver.Context;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import mockwebserver3.Dispatcher;
import mockwebserver3.MockResponse;
import mockwebserver3.MockWebServer;
import mockwebserver3.RecordedRequest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code kvroute gateway} with {@code discovery.kubernetes} and no static endpoint: a fabric8 mock
 * API server (CRUD mode) holds the pod, whose IP and port are a real HTTP pod on loopback.
 */
class GatewayKubernetesTest {
  private final HttpClient http = HttpClient.newHttpClient();

  /** fabric8's client configuration from system properties: the mock server, no kubeconfig. */
  private static final Map<String, String> CLIENT_PROPERTIES =
      Map.of(
          "kubernetes.auth.tryKubeConfig", "false",
          "kubernetes.auth.tryServiceAccount", "false");

  @Test
  void podsFromKubernetesServeTheGateway(@TempDir Path dir) throws Exception {
    KubernetesMockServer k8s =
        new KubernetesMockServer(
            new Context(),
            new io.fabric8.mockwebserver.MockWebServer(),
            new HashMap<>(),
            new KubernetesCrudDispatcher(),
            false);
    k8s.init();
    Map<String, String> saved = new HashMap<>();
    RunningCommand<GatewayCommand> gateway = null;
    try (KubernetesClient client = k8s.createClient();
        MockWebServer pod = new MockWebServer()) {
      pod.setDispatcher(
          new Dispatcher() {
            @Override
            public MockResponse dispatch(RecordedRequest r) {
              String path = r.getUrl().encodedPath();
              String body =
                  path.equals("/tokenize")
                      ? "{\"tokens\":[1,2,3],\"count\":3}"
                      : "{\"choices\":[{\"text\":\"hi\"}]}";
              return new MockResponse.Builder()
                  .code(200)
                  .setHeader("Content-Type", "application/json")
                  .body(body)
                  .build();
            }
          });
      pod.start();
      client
          .pods()
          .inNamespace("llm")
          .resource(
              new PodBuilder()
                  .withNewMetadata()
                  .withName("vllm-0")
                  .withLabels(Map.of("app", "vllm", "llm-d.ai/role", "decode"))
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
      for (Map.Entry<String, String> e : CLIENT_PROPERTIES.entrySet()) {
        saved.put(e.getKey(), System.getProperty(e.getKey()));
        System.setProperty(e.getKey(), e.getValue());
      }
      saved.put("kubernetes.master", System.getProperty("kubernetes.master"));
      System.setProperty("kubernetes.master", client.getMasterUrl().toString());

      Path cfg =
          GatewayYaml.write(
              dir,
              GatewayYaml.HTTP_ONE_ATTEMPT
                  + "discovery:\n"
                  + "  kubernetes:\n"
                  + "    namespace: llm\n"
                  + "    selector: { app: vllm }\n"
                  + "    port: "
                  + pod.getPort()
                  + "\n"
                  + "    kvEventsPort: 0\n");
      gateway = GatewayYaml.run(cfg);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      String base = GatewayYaml.base(gateway);
      while (get(base + "/readyz").statusCode() != 200) {
        assertThat(System.nanoTime()).as("the pod was not discovered").isLessThan(deadline);
        TimeUnit.MILLISECONDS.sleep(20);
      }
      assertThat(gateway.out.toString()).contains("discovering pods in Kubernetes namespace llm");
      HttpResponse<String> r =
          http.send(
              HttpRequest.newBuilder(URI.create(base + "/v1/completions"))
                  .timeout(Duration.ofSeconds(20))
                  .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"m\",\"prompt\":\"hi\"}"))
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
      assertThat(r.headers().firstValue("x-kvroute-decode")).contains("vllm-0");
      assertThat(get(base + "/metrics").body()).contains("kvroute_kubernetes_endpoints 1.0");
    } finally {
      // The mock API server first: it may stall on watches the client closes (see
      // kvroute-kubernetes'
      // MockCluster), then the gateway, which closes its discovery.
      k8s.destroy();
      if (gateway != null) {
        gateway.stop(gateway.command::shutdown);
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

  private HttpResponse<String> get(String url) throws Exception {
    return http.send(
        HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(10)).build(),
        HttpResponse.BodyHandlers.ofString());
  }
}
