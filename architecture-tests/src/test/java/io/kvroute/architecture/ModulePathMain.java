package io.kvroute.architecture;

import io.fabric8.kubernetes.client.ConfigBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.kvroute.connector.ConnectorConfig;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.HttpTransports;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.KVConnectors;
import io.kvroute.kubernetes.EndpointSink;
import io.kvroute.kubernetes.KubernetesDiscovery;
import io.kvroute.router.KvRouter;
import io.kvroute.router.RoutedResponse;
import io.kvroute.testkit.KvTransferProtocol;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.SimulatedCluster;
import io.kvroute.testkit.VllmSimulator;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * Run by {@link ModulePathTest} in a JVM where every library jar is a named module: checks the
 * modules' names and encapsulation, service discovery through {@code provides}/{@code uses}, and
 * routes one disaggregated request to simulated pods. Prints {@code MODULE-PATH-OK} when all is
 * well; throws otherwise.
 */
public final class ModulePathMain {
  private ModulePathMain() {}

  public static void main(String[] args) throws Exception {
    Module router = KvRouter.class.getModule();
    check(router.isNamed() && router.getName().equals("io.kvroute.router"), "router " + router);
    Module index = Class.forName("io.kvroute.kvindex.BlockIndex").getModule();
    check(index.getName().equals("io.kvroute.kvindex"), "kvindex " + index);
    check(!index.isExported("io.kvroute.kvindex.internal"), "kvindex.internal is exported");
    check(!index.isExported("io.kvroute.kvindex.backend"), "kvindex.backend is exported to all");
    Module redis = Class.forName("io.kvroute.kvindex.redis.RedisBlockIndex").getModule();
    check(
        index.isExported("io.kvroute.kvindex.backend", redis),
        "kvindex.backend is not exported to " + redis);
    Module http = Class.forName("io.kvroute.connector.http.OkHttpTransport").getModule();
    check(!http.isExported("io.kvroute.connector.http.internal"), "http.internal is exported");
    Set<String> types = KVConnectors.discover(ModulePathMain.class.getClassLoader()).types();
    check(
        types.containsAll(Set.of("http", "nixl", "lmcache", "mooncake", "sglang", "p2pnccl")),
        "connectors found through provides: " + types);
    check(
        HttpTransports.shared()
            .getClass()
            .getModule()
            .getName()
            .equals("io.kvroute.connector.http"),
        "default transport " + HttpTransports.shared().getClass());

    // kvroute-kubernetes: its module, and fabric8 (automatic modules) finding its HTTP client
    // through ServiceLoader; a client is created without contacting any server.
    Module kubernetes = KubernetesDiscovery.class.getModule();
    check(kubernetes.getName().equals("io.kvroute.kubernetes"), "kubernetes " + kubernetes);
    check(
        !kubernetes.isExported("io.kvroute.kubernetes.internal"),
        "kubernetes.internal is exported");
    try (KubernetesClient client =
            new KubernetesClientBuilder()
                .withConfig(new ConfigBuilder().withMasterUrl("http://127.0.0.1:9").build())
                .build();
        KvRouter empty = KvRouter.builder().build()) {
      KubernetesDiscovery.builder(EndpointSink.of(empty))
          .client(client)
          .selector(Map.of("app", "vllm"))
          .build()
          .close();
    }

    try (SimulatedCluster cluster =
        SimulatedCluster.builder()
            .prefill(1)
            .decode(1)
            .model("m")
            .protocol(KvTransferProtocol.NIXL)
            .configure(b -> b.blockSize(16).latency(LatencyModel.ZERO))
            .build()
            .start()) {
      KvRouter.Builder b = KvRouter.builder().model("m", ConnectorConfig.of("nixl"));
      for (VllmSimulator s : cluster.prefillPods()) {
        b.endpoint(endpoint(s, Endpoint.Role.PREFILL));
      }
      for (VllmSimulator s : cluster.decodePods()) {
        b.endpoint(endpoint(s, Endpoint.Role.DECODE));
      }
      try (KvRouter r = b.build()) {
        String prompt = "module path ".repeat(64);
        byte[] body =
            ("{\"model\":\"m\",\"max_tokens\":4,\"prompt\":\"" + prompt + "\"}")
                .getBytes(StandardCharsets.UTF_8);
        RoutedResponse resp =
            r.route(
                    InferenceRequest.of(
                        InferenceRequest.Api.COMPLETIONS, body, Map.of(), "module-path-1"))
                .get(60, TimeUnit.SECONDS);
        byte[] answer = resp.readAll(1 << 20).get(60, TimeUnit.SECONDS);
        check(resp.status() == 200, "status " + resp.status());
        check(
            new String(answer, StandardCharsets.UTF_8).contains("\"choices\""),
            "answer " + new String(answer, StandardCharsets.UTF_8));
      }
    }
    // replay: a tiny workload through the engine model and the scheduler, as named modules
    Module replay = io.kvroute.replay.Replay.class.getModule();
    check(replay.getName().equals("io.kvroute.replay"), "replay " + replay);
    check(!replay.isExported("io.kvroute.replay.internal"), "replay.internal is exported");
    io.kvroute.replay.ReplayReport report =
        io.kvroute.replay.Replay.builder(
                io.kvroute.replay.Workload.sharedPrefix(
                    new io.kvroute.replay.SharedPrefix(2, 2, 64, 16, 4, 50, 12), 1))
            .pods(2)
            .strategies(java.util.List.of(io.kvroute.replay.Strategy.PRECISE))
            .build()
            .run(io.kvroute.replay.ReplayListener.NONE);
    check(report.strategies().get(0).requests() == 12, "replay " + report.toJson());
    System.out.println("MODULE-PATH-OK");
  }

  private static Endpoint endpoint(VllmSimulator s, Endpoint.Role role) {
    return Endpoint.builder(s.name(), s.baseUrl().getHost(), s.baseUrl().getPort())
        .role(role)
        .build();
  }

  private static void check(boolean ok, String what) {
    if (!ok) {
      throw new AssertionError("module path check failed: " + what);
    }
  }
}
