package io.kvroute.envoy;

import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse.ResponseCase.IMMEDIATE_RESPONSE;

import io.envoyproxy.envoy.config.core.v3.HeaderValueOption;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.ImmediateResponse;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.router.KvRouter;
import io.kvroute.router.contract.FailureTableContract;
import java.net.InetSocketAddress;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The failure table through the Envoy picker, over gRPC on a loopback socket: its immediate
 * responses for requests it cannot route. The picker never sends a leg (Envoy does), so the
 * upstream rows are not its.
 */
class FailureTablePickerTest extends FailureTableContract {

  @Override
  protected boolean runsLegs() {
    return false;
  }

  @Override
  protected Seen send(
      KvRouter router, InferenceRequest.Api api, byte[] body, Map<String, String> requestHeaders)
      throws Exception {
    Server server =
        NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
            .addService(EndpointPicker.builder(router).build())
            .build()
            .start();
    ManagedChannel ch =
        NettyChannelBuilder.forAddress("127.0.0.1", server.getPort()).usePlaintext().build();
    try {
      EnvoyReplay s = EnvoyReplay.open(ch);
      Map<String, String> sent = new LinkedHashMap<>(requestHeaders);
      sent.put(":method", "POST");
      sent.put(":path", api.path());
      sent.put("content-type", "application/json");
      s.send(
          EnvoyReplay.requestHeaders(
              sent,
              false,
              null,
              EnvoyReplay.protocol(
                  BodySendMode.FULL_DUPLEX_STREAMED, BodySendMode.FULL_DUPLEX_STREAMED, false)));
      s.send(EnvoyReplay.requestBody(body, true));
      ImmediateResponse ir = s.next(IMMEDIATE_RESPONSE).getImmediateResponse();
      Map<String, String> headers = new LinkedHashMap<>();
      for (HeaderValueOption h : ir.getHeaders().getSetHeadersList()) {
        headers.put(h.getHeader().getKey(), h.getHeader().getRawValue().toStringUtf8());
      }
      return new Seen(ir.getStatus().getCodeValue(), headers, ir.getBody().toStringUtf8());
    } finally {
      ch.shutdownNow();
      server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
    }
  }
}
