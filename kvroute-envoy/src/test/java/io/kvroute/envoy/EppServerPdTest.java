package io.kvroute.envoy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.grpc.ManagedChannel;
import io.grpc.StatusRuntimeException;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.KVConnector;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.KVConnectors;
import io.kvroute.connector.http.OkHttpTransport;
import io.kvroute.envoy.EndpointPicker.BodyMode;
import io.kvroute.envoy.MiniEnvoy.Exchange;
import io.kvroute.envoy.MiniEnvoy.Mode;
import io.kvroute.router.KvRouter;
import io.kvroute.scoring.Scheduler;
import io.kvroute.testkit.KvTransferProtocol;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.RecordedRequest;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import java.io.UncheckedIOException;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@link EppServer} on a real loopback port (Netty, HTTP/2): the health services Envoy and
 * Kubernetes probe, and prefill/decode disaggregation end to end — the picker names the prefill pod
 * in {@code x-prefiller-host-port}, and a decode-side sidecar (the NIXL connector) runs the two
 * legs on simulated pods.
 */
class EppServerPdTest {

  private static Endpoint endpoint(VllmSimulator pod, Endpoint.Role role) {
    return Endpoint.builder(pod.name(), pod.baseUrl().getHost(), pod.baseUrl().getPort())
        .role(role)
        .build();
  }

  private static ServingStatus check(ManagedChannel ch, String service) {
    return HealthGrpc.newBlockingStub(ch)
        .withDeadlineAfter(30, TimeUnit.SECONDS)
        .check(HealthCheckRequest.newBuilder().setService(service).build())
        .getStatus();
  }

  @Test
  void healthFollowsTheEndpointsTheRouterKnows() throws Exception {
    try (KvRouter router = KvRouter.builder().build();
        EppServer server =
            EppServer.builder(EndpointPicker.builder(router).build()).port(0).build().start()) {
      ManagedChannel ch =
          NettyChannelBuilder.forAddress("127.0.0.1", server.port()).usePlaintext().build();
      try {
        assertThat(check(ch, "liveness")).isEqualTo(ServingStatus.SERVING);
        assertThat(check(ch, "")).isEqualTo(ServingStatus.SERVING);
        assertThat(check(ch, "readiness")).isEqualTo(ServingStatus.NOT_SERVING);
        assertThat(check(ch, ExternalProcessorGrpc.SERVICE_NAME))
            .isEqualTo(ServingStatus.NOT_SERVING);
        router.addEndpoint(Endpoint.of("http://127.0.0.1:18009", Endpoint.Role.BOTH));
        assertThat(check(ch, "readiness")).isEqualTo(ServingStatus.SERVING);
        assertThat(check(ch, ExternalProcessorGrpc.SERVICE_NAME)).isEqualTo(ServingStatus.SERVING);
        assertThatThrownBy(() -> check(ch, "nope"))
            .isInstanceOf(StatusRuntimeException.class)
            .hasMessageContaining("NOT_FOUND");
      } finally {
        ch.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
      }
    }
  }

  @Test
  void aPortInUseIsABindError() throws Exception {
    try (KvRouter router = KvRouter.builder().build();
        EppServer first =
            EppServer.builder(EndpointPicker.builder(router).build()).port(0).build().start()) {
      EppServer second =
          EppServer.builder(EndpointPicker.builder(router).build()).port(first.port()).build();
      assertThatThrownBy(second::start)
          .isInstanceOf(UncheckedIOException.class)
          .hasCauseInstanceOf(java.net.BindException.class)
          .hasMessageContaining("cannot listen on 127.0.0.1:" + first.port());
    }
  }

  @Test
  void disaggregatedRequestsNameThePrefillPodForTheDecodeSidecar() throws Exception {
    ScheduledExecutorService executor = Executors.newSingleThreadScheduledExecutor();
    OkHttpTransport transport = OkHttpTransport.create();
    try (SimulatedCluster cluster =
            SimulatedCluster.builder()
                .prefill(1)
                .decode(2)
                .model(ExtProcModesTest.MODEL)
                .protocol(KvTransferProtocol.NIXL)
                .configure(b -> b.blockSize(16).gpuBlocks(1024).latency(LatencyModel.ZERO))
                .build()
                .start();
        KvRouter router = pdRouter(cluster);
        EppServer server =
            EppServer.builder(EndpointPicker.builder(router).build()).port(0).build().start()) {
      KVConnector sidecar =
          KVConnectors.discover(getClass().getClassLoader())
              .create(
                  KVConnectorProvider.Context.builder(
                          ConnectorConfig.of("nixl"), transport, executor)
                      .build());
      ManagedChannel ch =
          NettyChannelBuilder.forAddress("127.0.0.1", server.port()).usePlaintext().build();
      try {
        MiniEnvoy envoy = new MiniEnvoy(ch, sidecar);
        VllmSimulator prefill = cluster.prefillPods().get(0);
        for (boolean streaming : new boolean[] {false, true}) {
          String prompt = "a long prompt that is worth a prefill pod ".repeat(10) + streaming;
          Exchange x =
              envoy.post(
                  "/v1/completions",
                  ExtProcModesTest.completion(prompt, streaming),
                  Map.of(),
                  Mode.of(BodyMode.FULL_DUPLEX_STREAMED),
                  null);
          assertThat(x.immediate).isNull();
          assertThat(x.setHeaders).containsEntry("x-prefiller-host-port", prefill.hostPort());
          assertThat(x.removedHeaders).doesNotContain("x-prefiller-host-port");
          assertThat(
                  EnvoyReplay.dynamic(
                      x.routingAnswer, EndpointPicker.KVROUTE_NAMESPACE, "disaggregated"))
              .isEqualTo("true");
          assertThat(
                  EnvoyReplay.dynamic(x.routingAnswer, EndpointPicker.KVROUTE_NAMESPACE, "prefill"))
              .isEqualTo(prefill.name());
          assertThat(cluster.decodePods().stream().map(VllmSimulator::hostPort))
              .contains(x.destinations.get(0));
          assertThat(x.status).isEqualTo(200);
          assertThat(x.clientText()).contains(streaming ? "data: [DONE]" : "\"choices\"");
        }
        assertThat(prefill.requests().stream().map(RecordedRequest::path))
            .as("the sidecar ran the prefill leg where the picker said")
            .contains("/v1/completions");
        ExtProcModesTest.await(() -> router.inFlight() == 0, "decisions complete");
      } finally {
        ch.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
        sidecar.close();
      }
    } finally {
      transport.close();
      executor.shutdownNow();
    }
  }

  private static KvRouter pdRouter(SimulatedCluster cluster) {
    Scheduler.Builder sb = Scheduler.builder();
    Scheduler.defaultProfiles(false).forEach(sb::profile);
    sb.prefillProfile(Scheduler.PREFILL_PROFILE).pdEnabled(true);
    KvRouter.Builder rb = KvRouter.builder().scheduler(sb.build());
    cluster.prefillPods().forEach(p -> rb.endpoint(endpoint(p, Endpoint.Role.PREFILL)));
    cluster.decodePods().forEach(p -> rb.endpoint(endpoint(p, Endpoint.Role.DECODE)));
    return rb.build();
  }
}
