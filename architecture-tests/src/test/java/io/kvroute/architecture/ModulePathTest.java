package io.kvroute.architecture;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The library on the module path: a child JVM gets every library jar and its dependencies on {@code
 * --module-path} (so each is a named module with its module-info, or an automatic module) and runs
 * {@link ModulePathMain} from the class path. The surefire runs of the modules' own tests use the
 * class path, as gateways without a module-info do; this covers the other way round.
 */
class ModulePathTest {
  /**
   * Test infrastructure and non-library artifacts that stay off the module path; and the local HF
   * tokenizer with DJL's dependencies: commons-compress's module-info requires commons-lang3, which
   * DJL does not bring, so that module's descriptor is checked by javac only.
   */
  private static final Pattern NOT_ON_MODULE_PATH =
      Pattern.compile(
          ".*(junit|opentest4j|apiguardian|assertj|archunit|surefire|testng|jcommander|"
              + "kvroute-cli|kvroute-examples|picocli|test-classes|kvroute-tokenizer-hf|/ai/djl/|"
              + "commons-compress|/net/java/dev/jna/|/com/google/code/gson/|"
              + "kvroute-envoy|kvroute-spring-cloud-gateway|/io/grpc/|/io/envoyproxy/|/com/google/|/io/perfmark/|"
              + "/io/opencensus/|/javax/annotation/|/org/codehaus/mojo/).*");

  @Test
  void theLibraryRunsAsNamedModules() throws Exception {
    List<String> modulePath = new ArrayList<>();
    List<String> classPath = new ArrayList<>();
    for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
      if (entry.isBlank()) {
        continue;
      }
      if (NOT_ON_MODULE_PATH.matcher(entry.replace('\\', '/')).matches()) {
        if (entry.contains("architecture-tests")) {
          classPath.add(entry);
        }
      } else {
        modulePath.add(entry);
      }
    }
    assertThat(modulePath).anyMatch(p -> p.contains("router"));
    Path java = Path.of(System.getProperty("java.home"), "bin", "java");
    List<String> command =
        List.of(
            java.toString(),
            "--module-path",
            String.join(File.pathSeparator, modulePath),
            "--add-modules",
            "ALL-MODULE-PATH",
            "-cp",
            String.join(File.pathSeparator, classPath),
            "-Dsun.net.httpserver.nodelay=true",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            ModulePathMain.class.getName());
    Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
    byte[] out;
    try {
      out = p.getInputStream().readAllBytes();
      assertThat(p.waitFor(120, TimeUnit.SECONDS)).as("child JVM ended").isTrue();
    } finally {
      p.destroyForcibly();
    }
    String output = new String(out, StandardCharsets.UTF_8);
    assertThat(p.exitValue()).as(output).isZero();
    assertThat(output).contains("MODULE-PATH-OK");
  }
}
