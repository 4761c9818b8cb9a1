package io.kvroute.cli;

import io.kvroute.connector.KVConnectors;
import java.io.FileNotFoundException;
import java.io.PrintWriter;
import java.net.BindException;
import java.net.UnknownHostException;
import java.nio.channels.UnresolvedAddressException;
import java.nio.file.NoSuchFileException;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ScopeType;

/**
 * Entry point of the {@code kvroute} executable jar.
 *
 * <p>Exit codes: 0 success; 2 a usage or configuration problem the user can fix (bad option,
 * invalid config, port in use, unknown host or connector type), printed as one line naming the
 * problem; 1 anything else (also one line; {@code --verbose} adds the stack trace).
 */
@Command(
    name = "kvroute",
    mixinStandardHelpOptions = true,
    versionProvider = Main.Version.class,
    header = "KV-cache-aware and prefill/decode routing for vLLM and SGLang.",
    subcommands = {
      // Each command lives in its own class in this package; add new ones here.
      CommandLine.HelpCommand.class,
      DemoCommand.class,
      ReplayCommand.class,
      ProxyCommand.class,
      ServeCommand.class,
      GatewayCommand.class,
      EppCommand.class,
      HashCommand.class,
      EventsCommand.class,
      SimCommand.class,
      TokenizeCommand.class,
      DoctorCommand.class,
    })
public final class Main implements Runnable {
  /** Exit code for problems the user can fix. */
  static final int USAGE = 2;

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  @Option(
      names = "--verbose",
      scope = ScopeType.INHERIT,
      description = "Print stack traces with errors")
  boolean verbose;

  public static void main(String[] args) {
    // Netty's leak detector samples 1 buffer in 128 and records a stack trace for it: a few
    // percent of the request path's CPU. The commands' buffers are released by one code path each
    // (tested with the detector on); -Dio.netty.leakDetection.level=simple turns it back on.
    if (System.getProperty("io.netty.leakDetection.level") == null) {
      System.setProperty("io.netty.leakDetection.level", "disabled");
    }
    System.exit(run(args));
  }

  /** Runs the CLI and returns its exit code; used by tests. */
  public static int run(String... args) {
    return commandLine().execute(args);
  }

  /** The configured command line (error handlers, defaults shown in every help text). */
  static CommandLine commandLine() {
    CommandLine cl = new CommandLine(new Main());
    cl.setExecutionExceptionHandler(Main::executionError);
    cl.setParameterExceptionHandler(Main::parameterError);
    showDefaults(cl);
    HelpTexts.addExamples(cl);
    return cl;
  }

  /** Every command shows its defaults and answers {@code -V} with the jar's version. */
  private static void showDefaults(CommandLine cl) {
    cl.getCommandSpec().usageMessage().showDefaultValues(true).autoWidth(true);
    if (cl.getCommandSpec().mixinStandardHelpOptions()) {
      cl.getCommandSpec().versionProvider(new Version());
    }
    cl.getSubcommands().values().forEach(Main::showDefaults);
  }

  @Override
  public void run() {
    spec.commandLine().usage(spec.commandLine().getOut());
  }

  private static int parameterError(CommandLine.ParameterException e, String[] args) {
    CommandLine cl = e.getCommandLine();
    PrintWriter err = cl.getErr();
    String unknown =
        e instanceof CommandLine.MissingParameterException ? unknownOption(cl, args) : null;
    err.println(
        cl.getCommandSpec().qualifiedName()
            + ": "
            + (unknown != null ? "Unknown option: '" + unknown + "'" : e.getMessage())
            + " (see "
            + cl.getCommandSpec().qualifiedName()
            + " --help)");
    if (List.of(args).contains("--verbose")) {
      e.printStackTrace(err);
    }
    err.flush();
    return USAGE;
  }

  /**
   * The first argument after the command's name that looks like an option the command does not
   * have, or null. Picocli reports a missing required option before an unknown one ({@code proxy
   * --bogus} would complain about {@code --decode}); the unknown option is the user's mistake.
   */
  static String unknownOption(CommandLine cl, String[] args) {
    CommandLine.Model.CommandSpec spec = cl.getCommandSpec();
    int from = 0;
    for (int i = 0; i < args.length; i++) {
      if (args[i].equals(spec.name())) {
        from = i + 1;
        break;
      }
    }
    for (int i = from; i < args.length; i++) {
      String a = args[i];
      if (a.equals("--")) {
        return null;
      }
      if (a.startsWith("-") && a.length() > 1 && !a.matches("-[0-9.].*")) {
        String name = a.contains("=") ? a.substring(0, a.indexOf('=')) : a;
        if (spec.findOption(name) == null) {
          return name;
        }
        CommandLine.Model.OptionSpec o = spec.findOption(name);
        if (o.arity().max() > 0 && !a.contains("=")) {
          i++; // skip the option's value
        }
      }
    }
    return null;
  }

  private static int executionError(
      Exception e, CommandLine cl, CommandLine.ParseResult parseResult) {
    PrintWriter err = cl.getErr();
    String command = cl.getCommandSpec().qualifiedName();
    String problem = userProblem(e);
    boolean verbose = parseResult.originalArgs().contains("--verbose");
    if (problem != null) {
      err.println(command + ": " + oneLine(problem));
    } else {
      err.println(
          command
              + ": unexpected "
              + e.getClass().getSimpleName()
              + (e.getMessage() == null ? "" : ": " + e.getMessage())
              + (verbose ? "" : " (run with --verbose for the stack trace)"));
    }
    if (verbose) {
      e.printStackTrace(err);
    }
    err.flush();
    return problem != null ? USAGE : 1;
  }

  /** Joins a multi-line message (YAML parser errors, for one) into one line. */
  static String oneLine(String message) {
    return message
        .lines()
        .map(String::strip)
        .filter(l -> !l.isEmpty() && !l.equals("^"))
        .reduce((a, b) -> a + " " + b)
        .orElse("");
  }

  /**
   * One line naming a problem the user can fix, or null when {@code e} looks like a bug. Walks the
   * cause chain, since configuration errors often arrive wrapped.
   */
  static String userProblem(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      String msg = t.getMessage();
      if (t instanceof BindException) {
        return msg != null && msg.startsWith("cannot listen")
            ? msg
            : "cannot listen: " + (msg == null ? "address already in use" : msg);
      }
      if (t instanceof io.kvroute.edge.EdgeBindException) {
        return msg;
      }
      if (t instanceof UnknownHostException) {
        return "unknown host: " + msg;
      }
      if (t instanceof UnresolvedAddressException) {
        return "an address could not be resolved (check host names in the configuration)";
      }
      if (t instanceof NoSuchFileException) {
        return "no such file: " + msg;
      }
      if (t instanceof FileNotFoundException) {
        return "cannot read " + msg;
      }
      if (t instanceof CliException || isConfigError(t)) {
        return msg;
      }
    }
    return null;
  }

  /**
   * Configuration and argument errors from the libraries: their messages name the field and the
   * problem already. Matched by name so the CLI keeps working whatever module defines them.
   */
  private static boolean isConfigError(Throwable t) {
    for (Class<?> c = t.getClass(); c != null; c = c.getSuperclass()) {
      String n = c.getSimpleName();
      if (n.endsWith("ConfigException")
          || n.equals("UnknownConnectorException")
          || n.equals("InvalidConfigurationException")
          || n.equals("IllegalArgumentException")) {
        return true;
      }
    }
    return false;
  }

  /** A problem with the user's input, reported as one line with exit code 2. */
  static final class CliException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    CliException(String message) {
      super(message, null, false, false);
    }
  }

  /** Reports the jar's version. */
  static final class Version implements CommandLine.IVersionProvider {
    @Override
    public String[] getVersion() {
      String v = Main.class.getPackage().getImplementationVersion();
      return new String[] {"kvroute " + (v == null ? "dev" : v)};
    }
  }

  /**
   * The connector types found with ServiceLoader, for help texts ({@code completionCandidates}).
   */
  static final class ConnectorTypes implements Iterable<String> {
    @Override
    public Iterator<String> iterator() {
      return KVConnectors.discover(Main.class.getClassLoader()).types().stream()
          .map(t -> t.toLowerCase(Locale.ROOT))
          .sorted()
          .iterator();
    }
  }
}
