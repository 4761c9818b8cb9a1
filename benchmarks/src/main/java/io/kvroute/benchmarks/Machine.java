package io.kvroute.benchmarks;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

/**
 * What a figure was measured on, for the header and result lines of every run in this module: the
 * CPU model, the core count, the JDK and the load average (figures from shared machines only travel
 * with them). Stateless and thread-safe.
 */
public final class Machine {
  private Machine() {}

  /** The CPU's model name ({@code /proc/cpuinfo}), or the architecture where there is none. */
  public static String cpuModel() {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/cpuinfo"), StandardCharsets.UTF_8)) {
        if (line.startsWith("model name")) {
          return line.substring(line.indexOf(':') + 1).trim();
        }
      }
    } catch (IOException | RuntimeException e) {
      // not Linux: fall through
    }
    return System.getProperty("os.arch");
  }

  /** {@code <cores> CPUs, <model>, JDK <version>, max heap <MB> MB}. */
  public static String describe() {
    return Runtime.getRuntime().availableProcessors()
        + " CPUs, "
        + cpuModel()
        + ", JDK "
        + System.getProperty("java.version")
        + ", max heap "
        + Runtime.getRuntime().maxMemory() / (1 << 20)
        + " MB";
  }

  /** The 1-minute load average. */
  public static String loadAverage() {
    return loadAverages().split(" ")[0];
  }

  /** The 1-, 5- and 15-minute load averages ({@code /proc/loadavg}; the 1-minute one elsewhere). */
  public static String loadAverages() {
    try {
      String[] p =
          Files.readString(Path.of("/proc/loadavg"), StandardCharsets.US_ASCII).trim().split(" ");
      return p[0] + " " + p[1] + " " + p[2];
    } catch (IOException | RuntimeException e) {
      return String.format(
          Locale.ROOT, "%.2f", ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage());
    }
  }
}
