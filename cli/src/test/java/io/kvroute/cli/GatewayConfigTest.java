package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.assembly.RouterSettings;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import picocli.CommandLine;

/**
 * {@code kvroute gateway}'s configuration is strict: every mistake stops it with one line naming
 * the field and exit code 2 (the regressions of issue 14).
 */
class GatewayConfigTest {
  @TempDir Path dir;

  private static final String D0 = "{ id: d0, url: \"http://127.0.0.1:8002\", role: decode }";

  private record Run(int exit, String err) {}

  private Run gateway(String yaml, String... extra) throws Exception {
    Path cfg = dir.resolve("gateway.yaml");
    Files.writeString(cfg, yaml, StandardCharsets.UTF_8);
    CommandLine cl = Main.commandLine();
    StringWriter err = new StringWriter();
    cl.setErr(new PrintWriter(err));
    cl.setOut(new PrintWriter(new StringWriter()));
    String[] args = new String[extra.length + 3];
    args[0] = "gateway";
    args[1] = "--config";
    args[2] = cfg.toString();
    System.arraycopy(extra, 0, args, 3, extra.length);
    return new Run(cl.execute(args), err.toString());
  }

  @ParameterizedTest(name = "{0}")
  @CsvSource(
      delimiter = '|',
      textBlock =
          """
          a typo must not start a gateway with no endpoints | 'endpoint:\\n  - {id: d0, url: "http://127.0.0.1:8002"}' | endpoint: unknown key; did you mean "endpoints"? known: admin, defaultConnector, discovery, drainTimeout, endpoints, fleet, flowControl, index, listen, models, observabilityHeaders, scheduler, scrapeMetrics, tokenizer, tracing
          duplicate YAML keys | 'listen: {port: 1}\\nlisten: {port: 2}\\nendpoints: [D0]' | listen: duplicate key (line 2)
          duplicate nested keys | 'listen: {port: 1, port: 2}\\nendpoints: [D0]' | listen.port: duplicate key (line 1)
          duplicate endpoint ids | 'endpoints: [D0, {id: d0, url: "http://127.0.0.1:8003"}]' | endpoints[1].id: duplicate id "d0" (also endpoints[0])
          duplicate default ids | 'endpoints: [{url: "http://127.0.0.1:8003"}, {url: "http://127.0.0.1:8003/"}]' | endpoints[1].id: duplicate id "127.0.0.1:8003" (also endpoints[0]; an id defaults to the URL's host:port)
          publisher over http | 'endpoints: [{id: d0, url: "http://127.0.0.1:8002", kvEvents: {publisher: "http://nope"}}]' | endpoints[0].kvEvents.publisher: must be a tcp:// or ipc:// endpoint such as "tcp://10.0.0.5:5557", was "http://nope"
          malformed URL | 'endpoints: [D0, {id: d1, url: "http//x"}]' | endpoints[1].url: not an http(s) URL: "http//x"
          URL with a path | 'endpoints: [{id: d1, url: "http://x:1/v1"}]' | endpoints[0].url: endpoint URL must not have a path (got "/v1"): "http://x:1/v1"
          bad role | 'endpoints: [{id: d1, url: "http://x:1", role: encode}]' | endpoints[0].role: must be one of prefill, decode, both; was "encode"
          a mapping where a string goes | 'endpoints: [{id: d1, url: {host: x}}]' | endpoints[0].url: must be a string, was a mapping
          a number where a mapping goes | 'listen: 8080\\nendpoints: [D0]' | listen: must be a mapping, was 8080
          a string where a number goes | 'listen: {port: "80"}\\nendpoints: [D0]' | listen.port: must be an integer, was "80"
          port out of range | 'listen: {port: 70000}\\nendpoints: [D0]' | listen.port: must be in [0, 65535], was 70000
          label values are strings | 'endpoints: [{id: d1, url: "http://x:1", labels: {gpu: 80}}]' | endpoints[0].labels.gpu: must be a string, was 80 (quote it if you mean the text)
          no endpoints | 'listen: {port: 0}' | endpoints: lists no endpoint; every request would fail (list the model servers, add a discovery section, or start with --admin to add them at run time)
          bad duration | 'scrapeMetrics: often\\nendpoints: [D0]' | scrapeMetrics: must be a duration such as "30s", "1m30s" or "250ms", was "often"
          connector section | 'defaultConnector: {type: http, retry: {maxAttempts: 0}}\\nendpoints: [D0]' | defaultConnector.retry.maxAttempts: must be >= 1, was 0
          model connector | 'models: {llama: {kvConnector: {timeouts: {prefill: soon}}}}\\nendpoints: [D0]' | models.llama.kvConnector.timeouts.prefill: must be a duration such as "30s", "1m30s" or "250ms", was "soon"
          model without section | 'models: {llama: {}}\\nendpoints: [D0]' | models.llama: needs a kvConnector or a tokenizer section (or leave it out)
          tokenizer without path | 'models: {llama: {tokenizer: {revision: main}}}\\nendpoints: [D0]' | models.llama.tokenizer.path: is required (the directory of the model's tokenizer files)
          tokenizer that cannot load | 'models: {llama: {tokenizer: {path: nowhere}}}\\nendpoints: [D0]' | models.llama.tokenizer.path:
          index block size | 'index: {blockSize: 0}\\nendpoints: [D0]' | index.blockSize: must be >= 1, was 0
          unknown index backend | 'index: {backend: valkey}\\nendpoints: [D0]' | index.backend: must be memory or redis, was "valkey"
          redis settings without the backend | 'index: {redis: {url: "redis://x:6379"}}\\nendpoints: [D0]' | index.redis: is set but backend is memory (add backend: redis)
          redis URL | 'index: {backend: redis, redis: {url: "http://x:6379"}}\\nendpoints: [D0]' | index.redis.url: not a redis://, rediss:// or valkey:// URL: "http://x:6379"
          redis ingest mode | 'index: {backend: redis, redis: {ingestMode: everyone}}\\nendpoints: [D0]' | index.redis.ingestMode: must be leased or all-replicas, was "everyone"
          listen timeout | 'listen: {headerTimeout: 0s}\\nendpoints: [D0]' | listen.headerTimeout: must be > 0, was PT0S
          admin token sources | 'admin: {tokenFile: a, tokenEnv: B}\\nendpoints: [D0]' | admin.tokenEnv: set only one of tokenFile and tokenEnv
          inline scheduler | 'scheduler: {plugins: [{type: queue-scorer}, {type: foo}]}\\nendpoints: [D0]' | scheduler.plugins[1].type: unknown plugin "foo"; known:
          scheduler as a list | 'scheduler: [a]\\nendpoints: [D0]' | scheduler: must be a file name or an EndpointPickerConfig mapping
          discovery without a section | 'discovery: {}' | discovery.kubernetes: is required (the kubernetes section), unless p2pnccl is given
          p2pnccl without a registry | 'discovery: {p2pnccl: {ttl: 5s}}' | discovery.p2pnccl.registry: is required (a tcp:// or ipc:// endpoint)
          p2pnccl registry not ZMQ | 'discovery: {p2pnccl: {registry: "127.0.0.1:30001"}}' | discovery.p2pnccl.registry: must be a tcp:// or ipc:// endpoint such as "tcp://10.0.0.5:5557", was "127.0.0.1:30001"
          p2pnccl zero ttl | 'discovery: {p2pnccl: {registry: "tcp://127.0.0.1:30001", ttl: 0s}}' | discovery.p2pnccl.ttl: must be > 0, was PT0S
          discovery with neither | 'discovery: {kubernetes: {namespace: llm}}' | discovery.kubernetes.selector: give exactly one of selector (pod labels) and inferencePool
          discovery with both | 'discovery: {kubernetes: {selector: {app: vllm}, inferencePool: p}}' | discovery.kubernetes.inferencePool: give exactly one of selector (pod labels) and inferencePool
          discovery key typo | 'discovery: {kubernetes: {inferencepool: p}}' | discovery.kubernetes.inferencepool: unknown key; did you mean "inferencePool"?
          discovery port | 'discovery: {kubernetes: {inferencePool: p, port: 0}}' | discovery.kubernetes.port: must be in [1, 65535], was 0
          discovery ranks | 'discovery: {kubernetes: {inferencePool: p, dataParallelSize: 0}}' | discovery.kubernetes.dataParallelSize: must be in [1, 1024], was 0
          discovery ranks past the ports | 'discovery: {kubernetes: {inferencePool: p, port: 65535, dataParallelSize: 2}}' | discovery.kubernetes.dataParallelSize: rank 1 would be at a port > 65535
          discovery KV-event port | 'discovery: {kubernetes: {inferencePool: p, kvEventsPort: -1}}' | discovery.kubernetes.kvEventsPort: must be in [0, 65535], was -1
          two documents | 'endpoints: [D0]\\n---\\nendpoints: [D0]' | only one document is allowed; found more after it (line 3)
          """)
  void mistakesStopTheGatewayWithOneLineNamingTheField(String name, String yaml, String message)
      throws Exception {
    Run r = gateway(yaml.replace("\\n", "\n").replace("D0", D0));
    assertThat(r.exit()).as(r.err()).isEqualTo(2);
    assertThat(r.err())
        .startsWith("kvroute gateway: " + dir.resolve("gateway.yaml") + ": ")
        .contains(message)
        .doesNotContain("java.", "Exception", "\tat ");
    assertThat(r.err().strip().lines()).hasSize(1);
  }

  @Test
  void aSchedulerFileNamesItselfInErrors() throws Exception {
    Files.writeString(dir.resolve("picker.yaml"), "plugins: [{type: load-aware-scorer, x: 1}]\n");
    Run r = gateway("scheduler: picker.yaml\nendpoints: [" + D0 + "]\n");
    assertThat(r.exit()).isEqualTo(2);
    assertThat(r.err().strip())
        .isEqualTo(
            "kvroute gateway: "
                + dir.resolve("picker.yaml")
                + ": plugins[0].x: unknown key; known: name, parameters, type");
  }

  @Test
  void theDocumentedExampleLoads() throws Exception {
    Path cfg = dir.resolve("gateway.yaml");
    Files.writeString(
        cfg,
        """
        listen: { host: 127.0.0.1, port: 8080 }
        observabilityHeaders: true
        scrapeMetrics: "2s"
        defaultConnector: { type: http }
        models:
          llama: { kvConnector: { type: nixl, timeouts: { prefill: "30s" } } }
        index: { blockSize: 16 }
        tracing: { enabled: true }
        scheduler: picker.yaml
        endpoints:
          - { id: p0, url: "http://127.0.0.1:8001", role: prefill }
          - id: d0
            url: "http://127.0.0.1:8002"
            role: decode
            labels: { zone: a }
            kvEvents: { publisher: "tcp://127.0.0.1:5557", replay: "tcp://127.0.0.1:5558" }
        """);
    GatewayConfig g = GatewayConfig.load(cfg);
    assertThat(g.listen().port()).isEqualTo(8080);
    RouterSettings c = g.settings();
    assertThat(c.tracing().enabled()).isTrue();
    assertThat(c.scrapeMetrics()).isEqualTo(Duration.ofSeconds(2));
    assertThat(c.modelConnectors().get("llama").type()).isEqualTo("nixl");
    assertThat(c.scheduler()).isEqualTo("picker.yaml");
    assertThat(c.endpoints().get(1).endpoint().labels()).containsEntry("zone", "a");
    assertThat(c.endpoints().get(1).events().replay()).isEqualTo("tcp://127.0.0.1:5558");
    assertThat(c.index().blockSize()).isEqualTo(16);
    // JSON when the file says so.
    Path json = dir.resolve("gateway.json");
    Files.writeString(json, "{\"endpoints\": [{\"url\": \"http://127.0.0.1:1\"}]}");
    assertThat(GatewayConfig.load(json).settings().endpoints().get(0).endpoint().id())
        .isEqualTo("127.0.0.1:1");
  }
}
