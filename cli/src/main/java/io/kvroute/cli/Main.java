package io.kvroute.cli;

import picocli.CommandLine;
import picocli.CommandLine.Command;

/** Entry point of the {@code kvroute} executable jar. */
@Command(
    name = "kvroute",
    mixinStandardHelpOptions = true,
    versionProvider = Main.Version.class,
    description = "KV-cache-aware and prefill/decode routing for vLLM and SGLang.",
    subcommands = {
      // Each command lives in its own class in this package; add new ones here.
      CommandLine.HelpCommand.class,
      DemoCommand.class,
      ProxyCommand.class,
      ServeCommand.class,
      GatewayCommand.class,
      HashCommand.class,
      EventsCommand.class,
      SimCommand.class,
      TokenizeCommand.class,
    })
public final class Main implements Runnable {

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  public static void main(String[] args) {
    System.exit(run(args));
  }

  /** Runs the CLI and returns its exit code; used by tests. */
  public static int run(String... args) {
    return new CommandLine(new Main()).execute(args);
  }

  @Override
  public void run() {
    spec.commandLine().usage(System.out);
  }

  /** Reports the jar's version. */
  static final class Version implements CommandLine.IVersionProvider {
    @Override
    public String[] getVersion() {
      String v = Main.class.getPackage().getImplementationVersion();
      return new String[] {"kvroute " + (v == null ? "dev" : v)};
    }
  }
}
