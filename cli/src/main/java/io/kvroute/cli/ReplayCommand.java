package io.kvroute.cli;

import io.kvroute.replay.Replay;
import io.kvroute.replay.ReplayListener;
import io.kvroute.replay.ReplayReport;
import io.kvroute.replay.RequestClass;
import io.kvroute.replay.SharedPrefix;
import io.kvroute.replay.Slo;
import io.kvroute.replay.Strategy;
import io.kvroute.replay.StrategyResult;
import io.kvroute.replay.TraceFormatException;
import io.kvroute.replay.Workload;
import io.kvroute.router.flow.FlowControlConfig;
import io.kvroute.testkit.engine.EngineProfile;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code kvroute replay}: a Mooncake trace (or inference-perf's shared-prefix shape) through a
 * simulated vLLM fleet in virtual time, routed by kvroute's own scheduler once per strategy, with a
 * table on the terminal and optional JSON and HTML reports.
 */
@Command(
    name = "replay",
    mixinStandardHelpOptions = true,
    header = "Replays a trace against a simulated vLLM fleet in virtual time, once per strategy.",
    description = {
      "Each request is routed by kvroute's Scheduler (the strategy's profiles; precise reads a"
          + " BlockIndex fed by the engines' msgpack KV events after --event-lag) to a vLLM engine"
          + " model (continuous batching, chunked prefill, prefix cache with LRU eviction,"
          + " preemption, a step-time model cited per --profile). Nothing sleeps: an hour of"
          + " trace replays in seconds. The same inputs and --seed give the same figures.",
      "Strategies: random, round-robin, least-load, approximate, precise, oracle (the engines'"
          + " true cache state, no lag), precise-latency (precise plus the predicted-latency"
          + " scorer; not in the default set)."
    })
final class ReplayCommand implements Callable<Integer> {

  @Option(
      names = "--trace",
      paramLabel = "FILE",
      description =
          "Mooncake JSONL trace (timestamp, input_length, output_length, hash_ids; .gz ok);"
              + " one of --trace or --workload (default: none)")
  Path trace;

  @Option(
      names = "--workload",
      paramLabel = "SHAPE",
      description =
          "A synthetic workload instead of --trace: shared-prefix (inference-perf's; default:"
              + " none)")
  String workload;

  @Option(names = "--groups", defaultValue = "150", description = "shared-prefix: system prompts")
  int groups;

  @Option(
      names = "--prompts-per-group",
      defaultValue = "5",
      description = "shared-prefix: questions per system prompt")
  int promptsPerGroup;

  @Option(
      names = "--system-prompt-len",
      defaultValue = "6000",
      description = "shared-prefix: system prompt tokens")
  int systemPromptLen;

  @Option(
      names = "--question-len",
      defaultValue = "1200",
      description = "shared-prefix: question tokens")
  int questionLen;

  @Option(
      names = "--output-len",
      defaultValue = "1000",
      description = "shared-prefix: output tokens")
  int outputLen;

  @Option(
      names = "--rate",
      defaultValue = "20",
      description = "shared-prefix: requests per second (Poisson)")
  double rate;

  @Option(
      names = "--requests",
      defaultValue = "3000",
      description = "shared-prefix: requests to send")
  int requests;

  @Option(
      names = "--limit",
      paramLabel = "N",
      description = "Replay only the first N requests of the workload (default: all)")
  Integer limit;

  @Option(
      names = "--trace-block-size",
      defaultValue = "512",
      description = "Tokens per hash id in the trace")
  int traceBlockSize;

  @Option(names = "--pods", defaultValue = "16", description = "Aggregated engines")
  int pods;

  @Option(
      names = "--prefill",
      description = "Prefill engines (with --decode: disaggregated; default: none, aggregated)")
  Integer prefill;

  @Option(
      names = "--decode",
      description = "Decode engines (with --prefill; default: none, aggregated)")
  Integer decode;

  @Option(
      names = "--profile",
      defaultValue = "llama-3.3-70b-fp8-2xh100",
      description = "Engine profile: llama-3.3-70b-fp8-2xh100, llama-3.1-8b-fp8-h200")
  String profile;

  @Option(
      names = "--kv-blocks",
      description =
          "Override the profile's KV blocks per engine (16 tokens each; default: the profile's)")
  Integer kvBlocks;

  @Option(
      names = "--speed",
      defaultValue = "1",
      description = "Arrival-time compression (2 = twice as fast): sets the load")
  double speed;

  @Option(
      names = "--strategies",
      defaultValue = "random,round-robin,least-load,approximate,precise,oracle",
      description = "Strategies to compare, in order")
  String strategies;

  @Option(
      names = "--latency-weight",
      defaultValue = "3",
      description =
          "precise-latency: weight of the predicted-latency scorer beside the default profiles'"
              + " (precise prefix x3)")
  double latencyWeight;

  @Option(
      names = "--latency-objective",
      defaultValue = "on",
      paramLabel = "on|off",
      description =
          "precise-latency: the scorer aims at each request's --slo/--class objective (on), or"
              + " sees none and prefers the lowest predicted TTFT (off)")
  String latencyObjective;

  @Option(
      names = "--slo",
      defaultValue = "ttft=2s,tpot=50ms",
      description = "Service-level objective for goodput")
  String slo;

  @Option(names = "--seed", defaultValue = "42", description = "Seed of routing randomness")
  long seed;

  @Option(
      names = "--event-lag",
      defaultValue = "5",
      paramLabel = "MS",
      description = "KV-event publication lag, milliseconds")
  double eventLagMs;

  @Option(
      names = "--json",
      paramLabel = "FILE",
      description = "Write the figures as JSON (default: none)")
  Path json;

  @Option(
      names = "--html",
      paramLabel = "FILE",
      description = "Write an HTML report (TTFT CDFs, hit ratio over time; default: none)")
  Path html;

  @Option(
      names = "--class",
      paramLabel = "SPEC",
      description =
          "A class of requests, repeatable: name:share=9,priority=-100,tenant=b,ttft=2s,tpot=50ms"
              + " (each request gets one class at random by share; figures per class; default:"
              + " none)")
  List<String> classes;

  @Option(
      names = "--flow-control",
      defaultValue = "off",
      paramLabel = "on|off",
      description = "Flow control in front of the scheduler (default off)")
  String flowControl;

  @Option(
      names = "--flow-fairness",
      defaultValue = "round-robin",
      description = "Fairness between a band's tenants: none, round-robin or vtc")
  String flowFairness;

  @Option(
      names = "--flow-ordering",
      defaultValue = "fcfs",
      description = "Order inside a tenant's queue: fcfs or edf")
  String flowOrdering;

  @Option(
      names = "--flow-ttl",
      paramLabel = "MS",
      description = "How long a request may wait in a band (default: the SLO's TTFT)")
  Double flowTtlMs;

  @Option(
      names = "--flow-queue",
      defaultValue = "1000",
      description = "Requests each band may hold waiting")
  int flowQueue;

  @Option(
      names = "--flow-queue-depth",
      defaultValue = "5",
      description = "Saturation: engine waiting requests at which an engine is saturated")
  int flowQueueDepth;

  @Option(
      names = "--flow-kv-usage",
      defaultValue = "0.8",
      description = "Saturation: KV-cache usage at which an engine is saturated")
  double flowKvUsage;

  @Option(
      names = "--flow-max-inflight",
      defaultValue = "0",
      description = "Saturation: requests in flight per engine (0: no limit)")
  int flowMaxInflight;

  @Option(
      names = "--flow-max-prefill-tokens",
      defaultValue = "0",
      description =
          "Saturation: uncached prompt tokens routed to an engine and awaiting their first token"
              + " (0: no limit)")
  long flowMaxPrefillTokens;

  @Option(
      names = "--flow-sheddable-saturation",
      defaultValue = "1.0",
      description =
          "The saturation up to which the sheddable band (negative priorities) is admitted; below"
              + " 1 it keeps headroom for the bands above")
  double flowSheddableSaturation;

  @Option(
      names = "--flow-slo-admission",
      defaultValue = "on",
      paramLabel = "on|off",
      description = "Hold or refuse what no engine is predicted to serve within its TTFT objective")
  String flowSloAdmission;

  @Option(
      names = "--replicas",
      defaultValue = "1",
      paramLabel = "N",
      description =
          "Gateway replicas: each request is routed by one of N schedulers, each with its own"
              + " in-flight counts and speculative entries, over the one shared index")
  int replicas;

  @Option(
      names = "--sharing",
      defaultValue = "on",
      paramLabel = "on|off",
      description =
          "With --replicas: share in-flight counts, speculative entries and the routing memory"
              + " through an in-memory FleetState (on), or not (off)")
  String sharing;

  @Option(
      names = "--assign",
      defaultValue = "round-robin",
      paramLabel = "round-robin|hash",
      description = "With --replicas: how requests are spread over the replicas")
  String assign;

  @Option(
      names = "--fleet-staleness",
      defaultValue = "3",
      paramLabel = "MS",
      description =
          "With --sharing on: delay before one replica's changes reach the others, milliseconds"
              + " (default: the p99 measured on Redis)")
  double fleetStalenessMs;

  @Option(
      names = "--fleet-memory-ttl",
      defaultValue = "300",
      paramLabel = "S",
      description =
          "With --sharing on: how long the shared routing memory keeps where a replica sent a"
              + " prompt, seconds (0: each replica keeps its own memory only)")
  double fleetMemoryTtlSeconds;

  @Option(names = "--no-progress", description = "No progress bar on stderr")
  boolean noProgress;

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  @Override
  public Integer call() throws Exception {
    PrintWriter out = spec.commandLine().getOut();
    PrintWriter err = spec.commandLine().getErr();
    Replay replay = replay();
    ReplayReport report = replay.run(noProgress ? ReplayListener.NONE : new Progress(err));
    out.print(report.toTable());
    if (json != null) {
      Files.writeString(json, report.toJson(), StandardCharsets.UTF_8);
      out.println("JSON report: " + json.toAbsolutePath());
    }
    if (html != null) {
      Files.writeString(html, report.toHtml(), StandardCharsets.UTF_8);
      out.println("HTML report: " + html.toAbsolutePath());
    }
    out.flush();
    return 0;
  }

  private Replay replay() {
    Workload w = workload();
    if (limit != null) {
      if (limit < 1) {
        throw new Main.CliException("--limit must be >= 1, was " + limit);
      }
      w = w.first(limit);
    }
    try {
      EngineProfile p = EngineProfile.named(profile);
      if (kvBlocks != null) {
        p = p.toBuilder().kvBlocks(kvBlocks).build();
      }
      Replay.Builder b =
          Replay.builder(w)
              .profile(p)
              .speed(speed)
              .strategies(Strategy.parseList(strategies))
              .slo(Slo.parse(slo))
              .seed(seed)
              .eventLag(Duration.ofNanos(Math.round(eventLagMs * 1e6)))
              .replicas(replicas)
              .sharing(onOff(sharing, "--sharing"))
              .assignment(Replay.Assignment.parse(assign))
              .fleetStaleness(Duration.ofNanos(Math.round(fleetStalenessMs * 1e6)))
              .fleetMemoryTtl(Duration.ofNanos(Math.round(fleetMemoryTtlSeconds * 1e9)))
              .latencyWeight(latencyWeight)
              .latencyObjective(onOff(latencyObjective, "--latency-objective"));
      if (onOff(flowControl, "--flow-control")) {
        b.flowControl(flowControlConfig());
      }
      if (prefill != null || decode != null) {
        if (prefill == null || decode == null) {
          throw new Main.CliException("--prefill and --decode go together");
        }
        b.prefillDecode(prefill, decode);
      } else {
        b.pods(pods);
      }
      return b.build();
    } catch (IllegalArgumentException e) {
      throw new Main.CliException(e.getMessage());
    }
  }

  private static boolean onOff(String v, String option) {
    switch (v.toLowerCase(java.util.Locale.ROOT)) {
      case "on":
        return true;
      case "off":
        return false;
      default:
        throw new Main.CliException(option + " must be on or off, was \"" + v + "\"");
    }
  }

  /** The default bands, with the replay's TTL, queue bound and ordering. */
  private FlowControlConfig flowControlConfig() {
    Duration ttl =
        flowTtlMs != null ? Duration.ofNanos(Math.round(flowTtlMs * 1e6)) : Slo.parse(slo).ttft();
    FlowControlConfig.Ordering ordering = FlowControlConfig.Ordering.parse(flowOrdering);
    List<FlowControlConfig.Band> bands = new ArrayList<>();
    for (FlowControlConfig.Band d : FlowControlConfig.builder().build().bands()) {
      bands.add(
          new FlowControlConfig.Band(
              d.name(),
              d.priority(),
              flowQueue,
              ttl,
              ordering,
              d.priority() < 0 ? flowSheddableSaturation : d.maxSaturation(),
              d.sheddable()));
    }
    return FlowControlConfig.builder()
        .bands(bands)
        .fairness(FlowControlConfig.Fairness.parse(flowFairness))
        .saturation(
            new FlowControlConfig.Saturation(
                flowQueueDepth, flowKvUsage, flowMaxInflight, flowMaxPrefillTokens))
        .sloAdmission(onOff(flowSloAdmission, "--flow-slo-admission"))
        .build();
  }

  private Workload workload() {
    Workload w = baseWorkload();
    if (classes == null || classes.isEmpty()) {
      return w;
    }
    List<RequestClass> cs = new ArrayList<>();
    try {
      for (String c : classes) {
        cs.add(RequestClass.parse(c));
      }
      return w.withClasses(cs, seed);
    } catch (IllegalArgumentException e) {
      throw new Main.CliException("--class: " + e.getMessage());
    }
  }

  private Workload baseWorkload() {
    if ((trace == null) == (workload == null)) {
      throw new Main.CliException("give either --trace FILE or --workload shared-prefix");
    }
    if (trace != null) {
      if (!Files.isRegularFile(trace)) {
        throw new Main.CliException("no such file: " + trace);
      }
      try {
        return Workload.mooncakeTrace(trace, traceBlockSize);
      } catch (TraceFormatException e) {
        if (e.getCause() instanceof NoSuchFileException) {
          throw new Main.CliException("no such file: " + trace);
        }
        throw new Main.CliException(e.getMessage());
      } catch (IllegalArgumentException e) {
        throw new Main.CliException(e.getMessage());
      }
    }
    if (!workload.equals("shared-prefix")) {
      throw new Main.CliException(
          "--workload: unknown shape \"" + workload + "\"; known: shared-prefix");
    }
    try {
      return Workload.sharedPrefix(
          new SharedPrefix(
              groups, promptsPerGroup, systemPromptLen, questionLen, outputLen, rate, requests),
          seed);
    } catch (IllegalArgumentException e) {
      throw new Main.CliException(e.getMessage());
    }
  }

  /** A progress bar per strategy on stderr, redrawn in place. */
  private static final class Progress implements ReplayListener {
    private final PrintWriter err;

    Progress(PrintWriter err) {
      this.err = err;
    }

    @Override
    public void onStrategyStart(Strategy strategy, int total) {
      onProgress(strategy, 0, total);
    }

    @Override
    public void onProgress(Strategy strategy, int done, int total) {
      int width = 30;
      int filled = total == 0 ? width : (int) ((long) done * width / total);
      err.printf(
          Locale.ROOT,
          "\r  %-15s [%s%s] %d/%d requests",
          strategy.cliName(),
          "#".repeat(filled),
          ".".repeat(width - filled),
          done,
          total);
      err.flush();
    }

    @Override
    public void onStrategyEnd(StrategyResult result) {
      err.printf(Locale.ROOT, "  (%.1f s, %d rejected)%n", result.wallSeconds(), result.rejected());
      err.flush();
    }
  }
}
