package io.kvroute.spring.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.RecordedRequest;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import java.net.http.HttpResponse;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Route mode in front of decode pods with an llm-d-style routing sidecar: for a disaggregated
 * decision the gateway sends the request to the decode pod with {@code x-prefiller-host-port}
 * naming the prefill pod (the sidecar runs the prefill); the gateway itself never calls it.
 */
@GatewayAppTest
class RouteModeSidecarTest {
  static final String MODEL = SimPods.MODEL;
  static SimulatedCluster cluster;

  @LocalServerPort int port;

  @DynamicPropertySource
  static void properties(DynamicPropertyRegistry registry) {
    // The "decode" pod is a plain engine standing in for decode + sidecar.
    cluster = SimPods.start(b -> b.prefill(1).both(1), LatencyModel.ZERO);
    VllmSimulator prefill = cluster.prefillPods().get(0);
    VllmSimulator decode = cluster.bothPods().get(0);
    SimPods.mode(registry, "route");
    SimPods.register(
        registry, List.of(prefill, decode), p -> p == prefill ? "prefill" : "decode", false);
  }

  @AfterAll
  static void stopCluster() {
    cluster.close();
  }

  @Test
  void theDecodePodGetsThePrefillerHeader() throws Exception {
    String prompt = "a long shared system prompt for the sidecar test ".repeat(16);
    HttpResponse<String> r =
        Http.post(
            port,
            "/v1/chat/completions",
            Http.chat(MODEL, prompt, false, 3),
            "x-prefiller-host-port",
            "10.0.0.1:1234");

    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    VllmSimulator prefill = cluster.prefillPods().get(0);
    VllmSimulator decode = cluster.bothPods().get(0);
    assertThat(r.headers().firstValue("x-kvroute-prefill")).contains(prefill.name());
    RecordedRequest seen = RouteModeTest.last(decode);
    assertThat(seen.header("x-prefiller-host-port")).contains(prefill.hostPort());
    assertThat(prefill.requests())
        .extracting(RecordedRequest::path)
        .as("the sidecar, not the gateway, runs the prefill")
        .noneMatch(p -> p.contains("completions"));
  }
}
