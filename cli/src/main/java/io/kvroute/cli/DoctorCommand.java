package io.kvroute.cli;

import io.kvroute.assembly.LocalTokenizers;
import io.kvroute.assembly.RouterSettings;
import io.kvroute.config.Durations;
import io.kvroute.kvindex.hash.HashAlgorithm;
import io.kvroute.kvindex.parity.HashSettings;
import io.kvroute.scoring.Tokenizer;
import java.io.PrintWriter;
import java.net.URI;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.function.Function;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code kvroute doctor}: checks that a running engine and kvroute agree on what precise routing
 * needs (KV events, block size, hash algorithm and seed, token ids, replay, clocks), with a fix for
 * each failed line. Exit code 0 when every check passes, 2 otherwise.
 */
@Command(
    name = "doctor",
    mixinStandardHelpOptions = true,
    header = "Checks that an engine and kvroute agree on KV events, hashing and token ids.",
    description = {
      "Sends a probe chat and a probe completion with unique prompts to the engine, follows its KV",
      "events and prints a checklist: events arrive; block size; hash algorithm and PYTHONHASHSEED;",
      "the token ids of the local tokenizer (with --config), /tokenize and the render endpoints",
      "against the ones the engine cached; the parity of kvroute's predicted block hashes; the",
      "replay endpoint; the clock skew of the events' ts. Each failed line says how to fix it.",
      "Exit code 0 when every check passes, 2 otherwise."
    })
final class DoctorCommand implements Callable<Integer> {

  @Option(
      names = "--engine",
      required = true,
      paramLabel = "URL",
      description = "The engine's base URL, e.g. http://10.0.0.7:8000")
  URI engine;

  @Option(
      names = "--events",
      required = true,
      paramLabel = "ENDPOINT",
      description = "The engine's KV-event publisher, e.g. tcp://10.0.0.7:5557")
  String events;

  @Option(
      names = "--replay",
      paramLabel = "ENDPOINT",
      description = "The engine's replay endpoint, e.g. tcp://10.0.0.7:5558 (default: not checked)")
  String replay;

  @Option(
      names = "--config",
      paramLabel = "FILE",
      description =
          "The gateway's configuration: its index.blockSize, index.hashAlgorithm,"
              + " index.pythonHashSeed and the model's local tokenizer"
              + " (default: kvroute's defaults)")
  Path config;

  @Option(names = "--model", description = "The model to probe (default: the engine's first)")
  String model;

  @Option(
      names = "--topic",
      defaultValue = "",
      description = "Topic prefix of the engine's events (default: all)")
  String topic;

  @Option(
      names = "--block-size",
      paramLabel = "N",
      description = "Tokens per block kvroute expects (default: the config's, else 16)")
  Integer blockSize;

  @Option(
      names = "--hash-algo",
      paramLabel = "NAME",
      description =
          "The --prefix-caching-hash-algo kvroute expects: sha256 (vLLM's default), sha256_cbor,"
              + " xxhash, xxhash_cbor (default: the config's index.hashAlgorithm, else sha256)")
  String hashAlgorithm;

  @Option(
      names = "--hash-seed",
      paramLabel = "VALUE",
      description =
          "The engine's PYTHONHASHSEED kvroute expects (default: the config's"
              + " index.pythonHashSeed, else unset, as vLLM's)")
  String hashSeed;

  @Option(
      names = "--timeout",
      defaultValue = "30s",
      converter = DoctorCommand.DurationConverter.class,
      description = "How long to wait for an answer or for events")
  Duration timeout;

  @Option(
      names = "--max-clock-skew",
      defaultValue = "2s",
      converter = DoctorCommand.DurationConverter.class,
      description = "The largest tolerated difference between the events' ts and this clock")
  Duration maxClockSkew;

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  /** Reads {@code 30s}, {@code 1m30s}, {@code 250ms} and the other forms of {@link Durations}. */
  static final class DurationConverter implements CommandLine.ITypeConverter<Duration> {
    @Override
    public Duration convert(String value) {
      Duration d = Durations.parse(value);
      if (d.isNegative() || d.isZero()) {
        throw new CommandLine.TypeConversionException("must be > 0, was " + value);
      }
      return d;
    }
  }

  @Override
  public Integer call() throws InterruptedException {
    PrintWriter out = spec.commandLine().getOut();
    if (engine.getScheme() == null
        || !(engine.getScheme().equals("http") || engine.getScheme().equals("https"))
        || engine.getHost() == null) {
      throw new Main.CliException("--engine: not an http(s) URL: \"" + engine + "\"");
    }
    GatewayConfig cfg = config == null ? null : GatewayConfig.load(config);
    RouterSettings.Index index = cfg == null ? null : cfg.settings().index();
    HashAlgorithm algorithm;
    try {
      algorithm =
          HashAlgorithm.fromVllmName(
              hashAlgorithm != null
                  ? hashAlgorithm
                  : index != null ? index.hashAlgorithm() : HashAlgorithm.SHA256.vllmName());
    } catch (IllegalArgumentException e) {
      throw new Main.CliException("--hash-algo: " + e.getMessage());
    }
    String seed = hashSeed != null ? hashSeed : index != null ? index.pythonHashSeed() : null;
    int size =
        blockSize != null
            ? blockSize
            : cfg != null && cfg.settings().index() != null
                ? cfg.settings().index().blockSize()
                : 16;
    if (size <= 0) {
      throw new Main.CliException("--block-size must be > 0, was " + size);
    }
    HashSettings expected = HashSettings.of(algorithm, size, seed);
    URI base = URI.create(engine.toString().replaceAll("/+$", ""));
    Doctor.Options options =
        new Doctor.Options(
            base,
            events,
            replay,
            topic,
            model,
            expected,
            cfg == null ? null : localTokenizer(cfg, config),
            "local tokenizer",
            timeout,
            maxClockSkew,
            Clock.systemUTC(),
            () -> UUID.randomUUID().toString().replace("-", ""));
    out.println(
        "kvroute doctor: engine "
            + base
            + ", events "
            + events
            + (replay == null ? "" : ", replay " + replay));
    out.println(
        "kvroute expects: "
            + expected.describe()
            + (config == null ? " (kvroute's defaults)" : " (" + config + ")"));
    out.println();
    out.flush();
    List<Doctor.Line> lines = new Doctor(options).run();
    int width = 0;
    for (Doctor.Line l : lines) {
      width = Math.max(width, l.check().length());
    }
    int failed = 0;
    for (Doctor.Line l : lines) {
      out.printf(Locale.ROOT, "%-4s  %-" + width + "s  %s%n", l.status(), l.check(), l.detail());
      if (l.status() == Doctor.Status.FAIL) {
        failed++;
        out.println("      " + " ".repeat(width) + "  fix: " + l.fix());
      }
    }
    out.println();
    out.println(failed == 0 ? "all checks passed" : failed + " check(s) failed");
    out.flush();
    return failed == 0 ? 0 : Main.USAGE;
  }

  /** The model's local tokenizer from {@code models.<name>.tokenizer}, or null when it has none. */
  private static Function<String, Tokenizer> localTokenizer(GatewayConfig cfg, Path file) {
    return name -> {
      RouterSettings.LocalTokenizer t = cfg.settings().tokenizers().get(name);
      return t == null
          ? null
          : LocalTokenizers.load(
              "models." + name + ".tokenizer",
              name,
              t,
              file.toAbsolutePath().getParent(),
              new io.micrometer.core.instrument.simple.SimpleMeterRegistry());
    };
  }
}
