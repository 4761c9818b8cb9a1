package io.kvroute.cli;

import java.util.List;
import java.util.Map;
import picocli.CommandLine;

/**
 * The examples at the foot of every command's {@code --help}, by qualified command name. Kept apart
 * from the commands so that each reads as the options it has; {@link Main} puts them in.
 */
final class HelpTexts {
  private HelpTexts() {}

  static final Map<String, List<String>> EXAMPLES =
      Map.ofEntries(
          Map.entry(
              "kvroute",
              List.of(
                  "kvroute demo                       # a simulated PD cluster, strategies side"
                      + " by side",
                  "kvroute gateway --config gateway.yaml",
                  "kvroute help proxy                 # the help of one command")),
          Map.entry(
              "kvroute demo",
              List.of(
                  "kvroute demo",
                  "kvroute demo --prefill 2 --decode 4 --html report.html",
                  "kvroute demo --strategies load,precise --connector http")),
          Map.entry(
              "kvroute proxy",
              List.of(
                  "kvroute proxy --connector nixl --prefill http://10.0.0.2:8000 \\",
                  "    --decode http://10.0.0.3:8000,http://10.0.0.4:8000 --port 8000",
                  "kvroute proxy --connector nixl --param remoteHostRewrite=always \\",
                  "    --prefill http://10.0.0.2:8000 --decode http://10.0.0.3:8000",
                  "kvroute proxy --connector mooncake --param bootstrapPort=8998 \\",
                  "    --prefill http://10.0.0.2:8000 --decode http://10.0.0.3:8000",
                  "kvroute proxy --decode http://10.0.0.3:8000 --listen maxBodyBytes=1048576 \\",
                  "    --tls-certificate cert.pem --tls-key key.pem",
                  "kvroute proxy --connector p2pnccl --registry tcp://0.0.0.0:30001 --port 10001")),
          Map.entry(
              "kvroute replay",
              List.of(
                  "kvroute replay --trace mooncake_trace.jsonl --pods 16 --speed 2 --json out.json",
                  "kvroute replay --trace trace.jsonl.gz --strategies round-robin,precise,oracle \\",
                  "    --slo ttft=2s,tpot=50ms --html report.html",
                  "kvroute replay --workload shared-prefix --groups 150 --prompts-per-group 5 \\",
                  "    --rate 6 --pods 8",
                  "kvroute replay --trace trace.jsonl --prefill 8 --decode 8")),
          Map.entry(
              "kvroute doctor",
              List.of(
                  "kvroute doctor --engine http://10.0.0.7:8000 --events tcp://10.0.0.7:5557",
                  "kvroute doctor --engine http://10.0.0.7:8000 --events tcp://10.0.0.7:5557 \\",
                  "    --replay tcp://10.0.0.7:5558 --config gateway.yaml",
                  "kvroute doctor --engine http://10.0.0.7:8000 --events tcp://10.0.0.7:5557 \\",
                  "    --hash-algo sha256_cbor --hash-seed 0 --block-size 16")),
          Map.entry(
              "kvroute gateway",
              List.of(
                  "kvroute gateway --config gateway.yaml",
                  "kvroute gateway --config gateway.yaml --port 0",
                  "kvroute gateway --config gateway.yaml --admin --admin-token-file admin.token")),
          Map.entry(
              "kvroute epp",
              List.of(
                  "kvroute epp --config gateway.yaml",
                  "kvroute epp --config gateway.yaml --port 9002 --metrics-port 9090")),
          Map.entry(
              "kvroute serve",
              List.of(
                  "kvroute serve --config serve.json",
                  "kvroute serve --config serve.yaml --host 0.0.0.0 --port 8080")),
          Map.entry(
              "kvroute sim",
              List.of(
                  "kvroute sim --both 2",
                  "kvroute sim --prefill 1 --decode 2 --protocol nixl",
                  "kvroute sim --decode 1 --hash-algo sha256_cbor --hash-seed 0")),
          Map.entry(
              "kvroute hash",
              List.of(
                  "kvroute hash --tokens 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16",
                  "kvroute hash --algo sha256_cbor --hash-seed 0 --block-size 4 --tokens"
                      + " 1,2,3,4,5,6,7,8 --json")),
          Map.entry(
              "kvroute events",
              List.of(
                  "kvroute events decode payload.hex",
                  "kvroute events tail --endpoint tcp://10.0.0.7:5557 --replay"
                      + " tcp://10.0.0.7:5558")),
          Map.entry(
              "kvroute events decode",
              List.of(
                  "kvroute events decode payload.hex",
                  "kvroute events decode --raw payload.bin",
                  "echo 93cb41d9... | kvroute events decode -")),
          Map.entry(
              "kvroute events tail",
              List.of(
                  "kvroute events tail --endpoint tcp://10.0.0.7:5557",
                  "kvroute events tail --endpoint tcp://10.0.0.7:5557 --replay"
                      + " tcp://10.0.0.7:5558 --count 10")),
          Map.entry(
              "kvroute tokenize",
              List.of(
                  "kvroute tokenize --model-dir ~/models/Qwen2.5-0.5B --prompt 'Hello'",
                  "kvroute tokenize --model-dir models--Qwen--Qwen2.5-0.5B --chat body.json"
                      + " --render")),
          Map.entry("kvroute help", List.of("kvroute help gateway")));

  /** Puts the examples of {@code cl} (and of its subcommands) at the foot of their help. */
  static void addExamples(CommandLine cl) {
    List<String> examples = EXAMPLES.get(cl.getCommandSpec().qualifiedName());
    if (examples != null) {
      cl.getCommandSpec()
          .usageMessage()
          .footerHeading("%nExamples:%n")
          .footer(examples.stream().map(e -> "  " + e.replace("%", "%%")).toArray(String[]::new));
    }
    cl.getSubcommands().values().forEach(HelpTexts::addExamples);
  }
}
