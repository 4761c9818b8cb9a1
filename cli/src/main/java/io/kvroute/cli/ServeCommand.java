package io.kvroute.cli;

import io.kvroute.service.KvIndexService;
import io.kvroute.service.ServiceConfig;
import io.kvroute.service.ServiceConfigException;
import java.nio.file.Path;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code kvroute serve}: the KV-cache manager as a service. */
@Command(
    name = "serve",
    mixinStandardHelpOptions = true,
    header = "Runs the KV-cache manager as an HTTP service.",
    description =
        "Follows every configured pod's vLLM KV events over ZMQ and serves POST /api/v1/score, GET /api/v1/cache/state, GET /api/v1/cache/pod/{id}, /healthz, /readyz, /metrics (Prometheus) and a dashboard at /.")
final class ServeCommand extends ServingCommand<KvIndexService> {

  @Option(
      names = "--config",
      required = true,
      paramLabel = "FILE",
      description =
          "Configuration file: JSON when its name ends in .json, else YAML (model, pods or"
              + " pods_file, index, tokenizer, http)")
  Path config;

  @Option(
      names = "--port",
      description = "Port to listen on, 0: any free port (default: http.port, else 8080)")
  Integer port;

  @Option(names = "--host", description = "Address to bind (default: http.host, else 127.0.0.1)")
  String host;

  @Override
  public Integer call() throws Exception {
    ServiceConfig cfg;
    try {
      cfg = ServiceConfig.load(config);
      if (port != null || host != null) {
        ServiceConfig.Builder b = cfg.toBuilder();
        if (port != null) {
          b.port(port);
        }
        if (host != null) {
          b.host(host);
        }
        cfg = b.build();
      }
    } catch (ServiceConfigException e) {
      spec.commandLine()
          .getErr()
          .println("kvroute serve: invalid configuration: " + Main.oneLine(e.getMessage()));
      return 2;
    }
    KvIndexService service;
    io.kvroute.tokenizer.hf.HfTokenizer local = null;
    try {
      KvIndexService.Builder sb = KvIndexService.builder(cfg);
      if (cfg.tokenizer().flatMap(t -> t.path()).isPresent()) {
        ServiceConfig.TokenizerSettings t = cfg.tokenizer().get();
        local =
            io.kvroute.tokenizer.hf.HfTokenizer.builder()
                .path(t.path().get())
                .revision(t.revision().orElse(null))
                .modelName(cfg.model())
                .cache(t.cacheEntries(), t.cacheMaxTokens())
                .build();
        sb.localTokenizer(local::encode);
      }
      service = sb.start();
    } catch (io.kvroute.tokenizer.hf.TokenizerLoadException e) {
      spec.commandLine().getErr().println("kvroute serve: tokenizer.path: " + e.getMessage());
      return 2;
    } catch (ServiceConfigException e) {
      spec.commandLine()
          .getErr()
          .println("kvroute serve: invalid configuration: " + Main.oneLine(e.getMessage()));
      return 2;
    }
    running = service;
    stop.onSignal("kvroute-serve-shutdown", service::close);
    spec.commandLine()
        .getOut()
        .printf(
            "kvroute serve listening on %s  model=%s pods=%d%n",
            service.baseUri(), cfg.model(), service.pods().size())
        .flush();
    stop.await();
    service.close();
    return 0;
  }

  /** Closes the service (tests). */
  @Override
  void stopServing(KvIndexService service) {
    service.close();
  }
}
