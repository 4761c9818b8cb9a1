package io.kvroute.cli;

import io.kvroute.kvindex.event.EventSchema;
import io.kvroute.kvindex.hash.HashAlgorithm;
import io.kvroute.testkit.KvTransferProtocol;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.SimulatedCluster;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code kvroute sim}: runs a {@link SimulatedCluster} of simulated vLLM pods standalone, printing
 * each pod's HTTP URL, ZMQ endpoints and role, until SIGTERM (or Ctrl-C).
 */
@Command(
    name = "sim",
    mixinStandardHelpOptions = true,
    header = "Runs simulated vLLM pods on loopback until SIGTERM.",
    description =
        "The pods serve OpenAI endpoints, /metrics and /tokenize, keep a prefix cache and publish ZMQ KV events with replay, in PD roles. Prints one line per pod: name, role, HTTP URL, ZMQ PUB and replay endpoints, topic.")
final class SimCommand extends ServingCommand<SimulatedCluster> {

  @Option(names = "--prefill", defaultValue = "0", description = "Prefill pods")
  int prefill;

  @Option(names = "--decode", defaultValue = "0", description = "Decode pods")
  int decode;

  @Option(
      names = "--both",
      defaultValue = "0",
      description = "Aggregated pods (default 1 if no others)")
  int both;

  @Option(
      names = "--tokenizer",
      paramLabel = "DIR",
      description =
          "Tokenize with a real model's tokenizer.json and chat template: a model directory or a"
              + " Hugging Face cache dir models--org--name (default: the built-in tokenizer)")
  java.nio.file.Path tokenizerDir;

  @Option(names = "--model", defaultValue = "sim-model", description = "Served model name")
  String model;

  @Option(
      names = "--lora",
      split = ",",
      showDefaultValue = CommandLine.Help.Visibility.NEVER,
      description = "LoRA adapters served, comma separated (default: none)")
  List<String> loras = new ArrayList<>();

  @Option(
      names = "--protocol",
      description =
          "KV transfer: none, nixl, shared_storage, mooncake, sglang (default: nixl"
              + " when there are prefill pods, else none)")
  String protocol;

  @Option(names = "--block-size", defaultValue = "16", description = "Tokens per KV block")
  int blockSize;

  @Option(names = "--gpu-blocks", defaultValue = "2048", description = "GPU KV blocks per pod")
  int gpuBlocks;

  @Option(names = "--cpu-blocks", defaultValue = "0", description = "CPU offload blocks per pod")
  int cpuBlocks;

  @Option(
      names = "--hash-algo",
      defaultValue = "sha256",
      description = "vLLM prefix-caching hash algorithm")
  String hashAlgo;

  @Option(
      names = "--hash-seed",
      description = {
        "The pods' PYTHONHASHSEED (e.g. 0). Default: unset, as in a default vLLM and as `kvroute",
        "hash` assumes: NONE_HASH is then seeded with \"vllm-none-hash\" for sha256 and",
        "sha256_cbor; xxhash and xxhash_cbor need a seed."
      })
  String hashSeed;

  @Option(
      names = "--event-schema",
      description = "KV-event schema family (A0..A5, M0..M2; default newest)")
  String eventSchema;

  @Option(names = "--host", defaultValue = "127.0.0.1", description = "Bind host")
  String host;

  @Option(names = "--max-running", defaultValue = "64", description = "Concurrent requests per pod")
  int maxRunning;

  @Option(
      names = "--prefill-us-per-token",
      defaultValue = "20",
      description = "Prefill time per uncached prompt token, microseconds")
  long prefillMicros;

  @Option(
      names = "--decode-ms-per-token",
      defaultValue = "1",
      description = "Decode time per output token, milliseconds")
  long decodeMillis;

  @Override
  public Integer call() throws InterruptedException {
    if (prefill < 0 || decode < 0 || both < 0) {
      throw new CommandLine.ParameterException(
          spec.commandLine(), "--prefill, --decode and --both must be >= 0");
    }
    int bothPods = prefill + decode + both == 0 ? 1 : both;
    KvTransferProtocol proto = parseProtocol();
    HashAlgorithm algo;
    EventSchema schema = null;
    try {
      algo = HashAlgorithm.fromVllmName(hashAlgo);
      if (eventSchema != null) {
        schema = EventSchema.valueOf(eventSchema.toUpperCase(Locale.ROOT));
      }
    } catch (IllegalArgumentException e) {
      throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
    }
    if (hashSeed == null && algo != HashAlgorithm.SHA256 && algo != HashAlgorithm.SHA256_CBOR) {
      throw new CommandLine.ParameterException(
          spec.commandLine(),
          "--hash-seed: required with --hash-algo "
              + hashAlgo
              + " (vLLM seeds its NONE_HASH randomly per process without PYTHONHASHSEED)");
    }
    EventSchema chosenSchema = schema;
    LatencyModel latency =
        new LatencyModel(
            Duration.ZERO, Duration.ofNanos(prefillMicros * 1000), Duration.ofMillis(decodeMillis));
    io.kvroute.testkit.EngineTokenizer engineTokenizer =
        io.kvroute.testkit.EngineTokenizer.simulated();
    if (tokenizerDir != null) {
      try {
        engineTokenizer =
            new HfEngineTokenizer(
                io.kvroute.tokenizer.hf.HfTokenizer.builder()
                    .path(tokenizerDir)
                    .modelName(model)
                    .build());
      } catch (io.kvroute.tokenizer.hf.TokenizerLoadException e) {
        throw new CommandLine.ParameterException(
            spec.commandLine(), "--tokenizer: " + e.getMessage());
      }
    }
    io.kvroute.testkit.EngineTokenizer chosenTokenizer = engineTokenizer;
    SimulatedCluster cluster;
    try {
      cluster =
          SimulatedCluster.builder()
              .prefill(prefill)
              .decode(decode)
              .both(bothPods)
              .model(model)
              .protocol(proto)
              .configure(
                  b -> {
                    b.host(host)
                        .loras(loras)
                        .blockSize(blockSize)
                        .gpuBlocks(gpuBlocks)
                        .cpuBlocks(cpuBlocks)
                        .hashAlgorithm(algo)
                        .hashSeed(hashSeed)
                        .maxRunning(maxRunning)
                        .latency(latency)
                        .tokenizer(chosenTokenizer);
                    if (chosenSchema != null) {
                      b.eventSchema(chosenSchema);
                    }
                  })
              .build();
    } catch (IllegalArgumentException e) {
      throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
    }
    cluster.start();
    running = cluster;
    stop.onSignal("kvroute-sim-shutdown", cluster::close);
    PrintWriter out = spec.commandLine().getOut();
    out.printf(
        "kvroute sim: %d pod(s), model %s, protocol %s, block size %d, %d GPU blocks%n",
        cluster.pods().size(), model, proto.name().toLowerCase(Locale.ROOT), blockSize, gpuBlocks);
    out.print(cluster.describe());
    out.flush();
    stop.await();
    cluster.close();
    return 0;
  }

  private KvTransferProtocol parseProtocol() {
    if (protocol == null) {
      return prefill > 0 ? KvTransferProtocol.NIXL : KvTransferProtocol.NONE;
    }
    try {
      return KvTransferProtocol.valueOf(protocol.toUpperCase(Locale.ROOT).replace('-', '_'));
    } catch (IllegalArgumentException e) {
      throw new CommandLine.ParameterException(
          spec.commandLine(),
          "--protocol: unknown \""
              + protocol
              + "\"; known: none, nixl, shared_storage, mooncake, sglang");
    }
  }
}
