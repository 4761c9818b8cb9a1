package io.kvroute.envoy;

import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse.ResponseCase.IMMEDIATE_RESPONSE;

import io.envoyproxy.envoy.config.core.v3.HeaderValueOption;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.ImmediateResponse;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.router.KvRouter;
import io.kvroute.router.contract.FailureTableContract;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The failure table through the Envoy picker: its immediate responses for requests it cannot route.
 * The picker never sends a leg (Envoy does), so the upstream rows are not its.
 */
class FailureTablePickerTest extends FailureTableContract {

  @Override
  protected boolean runsLegs() {
    return false;
  }

  @Override
  protected Seen send(KvRouter router, InferenceRequest.Api api, byte[] body) throws Exception {
    String name = InProcessServerBuilder.generateName();
    Server server =
        InProcessServerBuilder.forName(name)
            .addService(EndpointPicker.builder(router).build())
            .build()
            .start();
    ManagedChannel ch = InProcessChannelBuilder.forName(name).build();
    try {
      EnvoyReplay s = EnvoyReplay.open(ch);
      s.send(
          EnvoyReplay.requestHeaders(
              Map.of(":method", "POST", ":path", api.path(), "content-type", "application/json"),
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
