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
          "endpoints:\n  - { id: pod-0, url: \"" + pod.baseUrl() + "\", role: both }\n",
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
        assertThat(headers).isNotNull();
        assertThat(
                headers.getRequestHeaders().getResponse().getHeaderMutation().getSetHeadersList())
            .extracting(HeaderValueOption::getHeader)
            .extracting(h -> h.getKey() + "=" + h.getRawValue().toStringUtf8())
            .contains("x-gateway-destination-endpoint=" + pod.hostPort());
        requests.onCompleted();
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

  private static HeaderValue header(String k, String v) {
    return HeaderValue.newBuilder().setKey(k).setRawValue(ByteString.copyFromUtf8(v)).build();
  }
}
