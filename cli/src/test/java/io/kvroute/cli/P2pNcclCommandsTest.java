package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvroute.connector.Endpoint;
import io.kvroute.testkit.KvTransferProtocol;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.RecordedRequest;
import io.kvroute.testkit.SimRole;
import io.kvroute.testkit.VllmSimulator;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * vLLM P2pNccl (xPyD) end to end: {@code kvroute proxy --connector p2pnccl --registry}, {@code
 * kvroute gateway} with {@code discovery.p2pnccl} and {@code kvroute demo --protocol p2pnccl}, in
 * front of simulated instances that register themselves over ZMQ as vLLM's P2pNcclEngine does and
 * check the request id as vLLM's P2pNcclConnector does.
 */
class P2pNcclCommandsTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Pattern ID =
      Pattern.compile("___prefill_addr_(.+)___decode_addr_(.+)_([0-9a-f]{32})");

  private final List<VllmSimulator> pods = new ArrayList<>();
  private RunningCommand<?> running;
  private Runnable stop;

  @AfterEach
  void stopAll() throws Exception {
    if (running != null) {
      running.stop(stop);
    }
    pods.forEach(VllmSimulator::close);
  }

  private VllmSimulator pod(SimRole role, String registry) {
    VllmSimulator p =
        VllmSimulator.builder()
            .name(role.label() + "-" + pods.size())
            .model("m")
            .role(role)
            .protocol(KvTransferProtocol.P2P_NCCL)
            .p2pNcclProxy(registry)
            .p2pNcclPing(Duration.ofMillis(100))
            .transferTimeout(Duration.ofSeconds(20))
            .latency(LatencyModel.ZERO)
            .events(false)
            .build()
            .start();
    pods.add(p);
    return p;
  }

  static void await(String what, BooleanSupplier condition) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() - deadline > 0) {
        throw new AssertionError("timed out waiting until " + what);
      }
      LockSupport.parkNanos(5_000_000);
    }
  }

  /**
   * Checks one request's legs on the pods: the prefill got the client's body with {@code
   * max_tokens: 1} (and kvroute's one-token rules), the decode the client's body; both the same
   * addressed id, naming the prefill's and the decode's KV addresses; the decode loaded the KV.
   */
  private void checkLegs(String clientBody, VllmSimulator prefill, VllmSimulator decode)
      throws Exception {
    RecordedRequest p = last(prefill);
    RecordedRequest d = last(decode);
    String id = p.header("X-Request-Id").orElseThrow();
    assertThat(d.header("X-Request-Id")).contains(id);
    Matcher m = ID.matcher(id);
    assertThat(m.matches()).as(id).isTrue();
    assertThat(m.group(1)).isEqualTo(prefill.p2pNcclKvAddress());
    assertThat(m.group(2)).isEqualTo(decode.p2pNcclKvAddress());
    JsonNode original = JSON.readTree(clientBody);
    com.fasterxml.jackson.databind.node.ObjectNode expectedPrefill = original.deepCopy();
    expectedPrefill.put("max_tokens", 1); // the reference proxy's one change
    expectedPrefill.put("stream", false); // kvroute's prefill rules (docs/connectors.md)
    expectedPrefill.remove("stream_options");
    assertThat(p.json()).isEqualTo(expectedPrefill);
    assertThat(d.json()).isEqualTo(original);
  }

  private static RecordedRequest last(VllmSimulator pod) {
    List<RecordedRequest> rs = pod.requests();
    assertThat(rs).isNotEmpty();
    return rs.get(rs.size() - 1);
  }

  @Test
  void proxyRoutesToInstancesThatRegisteredAndForgetsThoseThatStop() throws Exception {
    ProxyCommand cmd = new ProxyCommand();
    running =
        RunningCommand.start(
            cmd,
            () -> cmd.running,
            "--connector",
            "p2pnccl",
            "--registry",
            "tcp://127.0.0.1:0",
            "--registry-ttl",
            "3s", // pings every 100 ms: a loaded machine must starve the pod for 3 s to lose one
            "--port",
            "0",
            "--max-attempts",
            "1");
    stop = cmd::shutdown;
    String base = "http://127.0.0.1:" + cmd.running.port();
    String registry = cmd.instances.endpoint();
    // (the command prints its line just after it starts serving)
    await(
        "the proxy names its registry",
        () -> running.out.toString().contains("registry=" + registry));

    // nothing registered yet: no pair, 503
    HttpResponse<String> none =
        TestHttp.postJson(base + "/v1/completions", "{\"model\":\"m\",\"prompt\":\"hi\"}");
    assertThat(none.statusCode()).isEqualTo(503);

    // 2 prefill + 2 decode instances register themselves (2P2D)
    VllmSimulator p0 = pod(SimRole.PREFILL, registry);
    VllmSimulator p1 = pod(SimRole.PREFILL, registry);
    VllmSimulator d0 = pod(SimRole.DECODE, registry);
    VllmSimulator d1 = pod(SimRole.DECODE, registry);
    await("4 instances registered", () -> cmd.instances.endpoints().size() == 4);
    assertThat(cmd.instances.endpoints(Endpoint.Role.PREFILL))
        .extracting(Endpoint::id)
        .containsExactlyInAnyOrder(p0.hostPort(), p1.hostPort());

    Set<String> pairs = new HashSet<>();
    for (int i = 0; i < 4; i++) {
      String body =
          "{\"model\":\"m\",\"prompt\":\"the same long prompt for every request, number "
              + i
              + "\",\"max_tokens\":5}";
      HttpResponse<String> r = TestHttp.postJson(base + "/v1/completions", body);
      assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
      VllmSimulator prefill = lastServed(p0, p1);
      VllmSimulator decode = lastServed(d0, d1);
      checkLegs(body, prefill, decode);
      pairs.add(prefill.name() + ">" + decode.name());
      // the decode loaded the prompt's KV from the prefill named in the id
      assertThat(JSON.readTree(r.body()).at("/usage/prompt_tokens_details/cached_tokens").asInt())
          .isPositive();
      prefill.clearRequests();
      decode.clearRequests();
    }
    assertThat(pairs).as("round robin over both prefills and both decodes").hasSize(2);

    // a streamed chat: the decode's stream comes back whole
    String chat =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hello there\"}],"
            + "\"stream\":true,\"stream_options\":{\"include_usage\":true},\"max_tokens\":4}";
    HttpResponse<String> sse = TestHttp.postJson(base + "/v1/chat/completions", chat);
    assertThat(sse.statusCode()).isEqualTo(200);
    assertThat(sse.body()).contains("data: [DONE]");
    checkLegs(chat, lastServed(p0, p1), lastServed(d0, d1));

    // d1 stops its heartbeat: it expires, and every request goes to d0
    d1.faults().silenceRegistration(true);
    await("d1 expires", () -> cmd.instances.endpoints(Endpoint.Role.DECODE).size() == 1);
    d0.clearRequests();
    d1.clearRequests();
    for (int i = 0; i < 3; i++) {
      assertThat(
              TestHttp.postJson(
                      base + "/v1/completions", "{\"model\":\"m\",\"prompt\":\"after " + i + "\"}")
                  .statusCode())
          .isEqualTo(200);
    }
    assertThat(d1.requests()).isEmpty();
    assertThat(d0.requests()).hasSize(3);
    // and comes back when it beats again
    d1.faults().silenceRegistration(false);
    await("d1 rejoins", () -> cmd.instances.endpoints(Endpoint.Role.DECODE).size() == 2);
  }

  /** The one of {@code a} and {@code b} that has served a request since it was last cleared. */
  private static VllmSimulator lastServed(VllmSimulator a, VllmSimulator b) {
    boolean ia = !a.requests().isEmpty();
    boolean ib = !b.requests().isEmpty();
    assertThat(ia ^ ib).as("exactly one of " + a.name() + ", " + b.name() + " served").isTrue();
    return ia ? a : b;
  }

  @Test
  void proxyOptionsForTheRegistryAreChecked() {
    StringWriter err = new StringWriter();
    CommandLine cl = Main.commandLine();
    cl.setErr(new PrintWriter(err));
    cl.setOut(new PrintWriter(new StringWriter()));
    assertThat(
            cl.execute(
                "proxy",
                "--registry",
                "tcp://127.0.0.1:0",
                "--decode",
                "http://127.0.0.1:1",
                "--port",
                "0"))
        .isEqualTo(2);
    assertThat(err.toString()).startsWith("kvroute proxy: --registry: replaces --prefill and");
    StringWriter err2 = new StringWriter();
    cl.setErr(new PrintWriter(err2));
    assertThat(cl.execute("proxy", "--port", "0")).isEqualTo(2);
    assertThat(err2.toString()).startsWith("kvroute proxy: --decode: is required (or --registry");
    StringWriter err3 = new StringWriter();
    cl.setErr(new PrintWriter(err3));
    assertThat(cl.execute("proxy", "--registry", "30001", "--port", "0")).isEqualTo(2);
    assertThat(err3.toString()).startsWith("kvroute proxy: --registry: must be a ZMQ endpoint");
  }

  @Test
  void gatewayDiscoversRegisteredInstances(@TempDir Path dir) throws Exception {
    Path cfg =
        GatewayYaml.write(
            dir,
            "listen: { host: 127.0.0.1, port: 0 }\n"
                + "observabilityHeaders: true\n"
                + "defaultConnector: { type: p2pnccl, retry: { maxAttempts: 1 } }\n"
                + "discovery:\n"
                + "  p2pnccl: { registry: \"tcp://127.0.0.1:0\", ttl: 3s }\n"
                + "scheduler:\n"
                + "  plugins:\n"
                + "  - type: decode-filter\n"
                + "  - type: prefill-filter\n"
                + "  - type: queue-scorer\n"
                + "  - type: max-score-picker\n"
                + "  - type: always-disagg-pd-decider\n"
                + "  - type: disagg-profile-handler\n"
                + "    parameters:\n"
                + "      profiles: { decode: decode, prefill: prefill }\n"
                + "      deciders: { prefill: always-disagg-pd-decider }\n"
                + "  schedulingProfiles:\n"
                + "  - name: decode\n"
                + "    plugins: [{pluginRef: decode-filter}, {pluginRef: queue-scorer},"
                + " {pluginRef: max-score-picker}]\n"
                + "  - name: prefill\n"
                + "    plugins: [{pluginRef: prefill-filter}, {pluginRef: queue-scorer},"
                + " {pluginRef: max-score-picker}]\n");
    RunningCommand<GatewayCommand> gateway = GatewayYaml.run(cfg);
    running = gateway;
    stop = gateway.command::shutdown;
    Pattern line = Pattern.compile("P2pNccl instances register at (tcp://\\S+)");
    await("the gateway names its registry", () -> line.matcher(gateway.out.toString()).find());
    Matcher m = line.matcher(gateway.out.toString());
    assertThat(m.find()).isTrue();
    String registry = m.group(1);
    VllmSimulator p = pod(SimRole.PREFILL, registry);
    VllmSimulator d = pod(SimRole.DECODE, registry);
    String base = GatewayYaml.base(gateway);
    await("both registered", () -> gateway.command.running != null && registered(base, 2));
    String body = "{\"model\":\"m\",\"prompt\":\"a prompt the gateway routes\",\"max_tokens\":3}";
    HttpResponse<String> r = TestHttp.postJson(base + "/v1/completions", body);
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    assertThat(r.headers().firstValue("x-kvroute-decode")).contains(d.hostPort());
    checkLegs(body, p, d);
    // the decode stops beating: it leaves the gateway's endpoints
    d.faults().silenceRegistration(true);
    await("the decode leaves", () -> registered(base, 1));
  }

  /** Whether the gateway reports {@code n} endpoints in its metrics... or readiness. */
  private static boolean registered(String base, int n) {
    try {
      HttpResponse<String> metrics = TestHttp.get(base + "/metrics");
      Matcher m =
          Pattern.compile("kvroute_connector_events_total\\{event=\"instance_joined\"[^}]*} (\\S+)")
              .matcher(metrics.body());
      Matcher e =
          Pattern.compile(
                  "kvroute_connector_events_total\\{event=\"instance_expired\"[^}]*} (\\S+)")
              .matcher(metrics.body());
      double joined = m.find() ? Double.parseDouble(m.group(1)) : 0;
      double expired = e.find() ? Double.parseDouble(e.group(1)) : 0;
      return joined - expired == n;
    } catch (Exception ex) {
      return false;
    }
  }

  @Test
  void demoRunsWithP2pNccl() {
    CommandLine cl = new CommandLine(new DemoCommand());
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    cl.setOut(new PrintWriter(out));
    cl.setErr(new PrintWriter(err));
    int code =
        cl.execute(
            "--protocol", "p2pnccl",
            "--prefill", "1",
            "--decode", "2",
            "--conversations", "4",
            "--turns", "2",
            "--concurrency", "2",
            "--replicas", "1",
            "--strategies", "load,precise");
    assertThat(code).as(err.toString()).isZero();
    assertThat(out.toString()).contains("p2pnccl connector");
    assertThat(out.toString())
        .as(err.toString())
        .containsPattern("(?m)^load +8 +0 ")
        .containsPattern("(?m)^precise +8 +0 ");
  }
}
