package io.kvroute.envoy.internal;

import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.grpc.Status;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.stub.StreamObserver;
import java.util.function.BooleanSupplier;

/**
 * The gRPC health service as the endpoint-picker protocol asks: {@code liveness} (and the empty
 * service name) is {@code SERVING} while the process answers; {@code readiness} and {@code
 * envoy.service.ext_proc.v3.ExternalProcessor} are {@code SERVING} when {@code ready} says so
 * (endpoints known). Other names are {@code NOT_FOUND}. Status is computed on each {@code Check},
 * so it is never stale; {@code Watch} is not implemented (clients fall back to {@code Check}).
 *
 * <p>Thread-safe when {@code ready} is.
 */
public final class Health extends HealthGrpc.HealthImplBase {
  /** The liveness service name. */
  public static final String LIVENESS = "liveness";

  /** The readiness service name. */
  public static final String READINESS = "readiness";

  private final BooleanSupplier ready;

  /** A health service reporting readiness from {@code ready}. */
  public Health(BooleanSupplier ready) {
    this.ready = ready;
  }

  @Override
  public void check(HealthCheckRequest request, StreamObserver<HealthCheckResponse> out) {
    String service = request.getService();
    HealthCheckResponse.ServingStatus s;
    if (service.isEmpty() || service.equals(LIVENESS)) {
      s = HealthCheckResponse.ServingStatus.SERVING;
    } else if (service.equals(READINESS) || service.equals(ExternalProcessorGrpc.SERVICE_NAME)) {
      s =
          ready.getAsBoolean()
              ? HealthCheckResponse.ServingStatus.SERVING
              : HealthCheckResponse.ServingStatus.NOT_SERVING;
    } else {
      out.onError(Status.NOT_FOUND.withDescription("unknown service " + service).asException());
      return;
    }
    out.onNext(HealthCheckResponse.newBuilder().setStatus(s).build());
    out.onCompleted();
  }
}
