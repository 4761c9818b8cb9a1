package io.kvroute.spring.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.router.KvRouter;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.RecordedRequest;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import java.net.http.HttpResponse;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Route mode, decode only: kvroute picks the pod, Spring Cloud Gateway's own routing filter proxies
 * the request to it. The last test stops the pods one by one.
 */
@GatewayAppTest
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class RouteModeTest {
  static final String MODEL = SimPods.MODEL;
  static SimulatedCluster cluster;

  @LocalServerPort int port;
  @Autowired KvRouter router;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    cluster = SimPods.start(b -> b.both(2), LatencyModel.ZERO);
    SimPods.mode(registry, "route");
    SimPods.register(registry, cluster.pods(), p -> "decode", false);
  }

  @AfterAll
  static void stopCluster() {
    cluster.close();
  }

  @Test
  @Order(1)
  void theGatewayProxiesToThePodKvrouteChose() throws Exception {
    HttpResponse<String> r =
        Http.post(
            port,
            "/v1/chat/completions?trace=1",
            Http.chat(MODEL, "hello there", false, 3),
            "x-prefiller-host-port",
            "10.0.0.1:1234");

    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    assertThat(r.body()).contains("\"choices\"");
    String decode = r.headers().firstValue("x-kvroute-decode").orElseThrow();
    VllmSimulator pod = cluster.pod(decode).orElseThrow();
    RecordedRequest seen = last(pod);
    assertThat(seen.path()).startsWith("/v1/chat/completions");
    assertThat(seen.header("x-prefiller-host-port"))
        .as("a client's PD header never reaches the pod")
        .isEmpty();
    assertThat(seen.field("model").asText()).isEqualTo(MODEL);
    Http.await("the outcome is reported", () -> router.inFlight() == 0);
  }

  @Test
  @Order(2)
  void aStreamedChatIsProxied() throws Exception {
    HttpResponse<String> r =
        Http.post(port, "/v1/chat/completions", Http.chat(MODEL, "stream please", true, 5));

    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    assertThat(r.headers().firstValue("content-type"))
        .hasValueSatisfying(t -> assertThat(t).startsWith("text/event-stream"));
    assertThat(r.body()).startsWith("data: ").endsWith("data: [DONE]\n\n");
    Http.await("the outcome is reported", () -> router.inFlight() == 0);
  }

  @Test
  @Order(3)
  void otherV1PathsAreRoutedLoadOnlyAndOtherPathsPassThroughUntouched() throws Exception {
    // another API under /v1/: routed to a pod by load only, sent there unchanged
    HttpResponse<String> models = Http.get(port, "/v1/models");
    assertThat(models.statusCode()).as(models.body()).isEqualTo(200);
    String pod = models.headers().firstValue("x-kvroute-decode").orElseThrow();
    assertThat(cluster.pod(pod)).isPresent();
    // the pod's own model list (the route's URI has nothing listening)
    assertThat(models.body()).contains("\"" + MODEL + "\"");
    Http.await("the pass-through decision completes", () -> router.inFlight() == 0);
    // a path outside /v1/: the route's own URI (nothing listens there), kvroute did not route it
    HttpResponse<String> r = Http.get(port, "/other/models");
    assertThat(r.statusCode()).isGreaterThanOrEqualTo(400);
    assertThat(r.headers().firstValue("x-kvroute-decode")).isEmpty();
    assertThat(cluster.pods().stream().flatMap(p -> p.requests().stream()))
        .extracting(RecordedRequest::path)
        .doesNotContain("/other/models");
  }

  @Test
  @Order(4)
  void aStoppedPodIsRoutedAroundThenAllStoppedIsAnOpenAiError() throws Exception {
    VllmSimulator stopped = cluster.pods().get(0);
    VllmSimulator alive = cluster.pods().get(1);
    stopped.close();
    for (int i = 0; i < 4; i++) {
      HttpResponse<String> r =
          Http.post(
              port, "/v1/chat/completions", Http.chat(MODEL, "after stop " + i, i % 2 == 1, 3));
      assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
      assertThat(r.headers().firstValue("x-kvroute-decode")).contains(alive.name());
    }
    alive.close();
    HttpResponse<String> r =
        Http.post(port, "/v1/chat/completions", Http.chat(MODEL, "nobody home", false, 3));
    assertThat(r.statusCode()).as(r.body()).isEqualTo(502);
    assertThat(r.headers().firstValue("content-type")).contains("application/json");
    assertThat(r.body()).startsWith("{\"error\":{").contains("\"type\":\"upstream_error\"");
    Http.await("every outcome is reported", () -> router.inFlight() == 0);
  }

  static RecordedRequest last(VllmSimulator pod) {
    List<RecordedRequest> all = pod.requests();
    assertThat(all).isNotEmpty();
    return all.get(all.size() - 1);
  }
}
