package io.kvroute.kvindex.event;

import static org.assertj.core.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * Locates and reads the shared golden vectors ({@code shared/vectors}, walking up from the module).
 */
public final class TestVectors {

  private TestVectors() {}

  /** The {@code shared/vectors} directory, found by walking up from the working directory. */
  public static Path dir() {
    Path start = Paths.get(System.getProperty("basedir", System.getProperty("user.dir")));
    for (Path p = start.toAbsolutePath(); p != null; p = p.getParent()) {
      Path candidate = p.resolve("shared").resolve("vectors");
      if (Files.isDirectory(candidate)) {
        return candidate;
      }
    }
    return fail(
        "golden vectors not found: no shared/vectors directory above "
            + start.toAbsolutePath()
            + " (expected ../../shared/vectors from the module)");
  }

  /** Reads one vector file as a JSON tree. */
  public static JsonNode read(String name) {
    Path f = dir().resolve(name);
    try {
      return new ObjectMapper().readTree(f.toFile());
    } catch (IOException e) {
      return fail("cannot read golden vector file " + f + ": " + e);
    }
  }

  /** Hex string to bytes. */
  public static byte[] hex(String s) {
    byte[] b = new byte[s.length() / 2];
    for (int i = 0; i < b.length; i++) {
      b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
    }
    return b;
  }

  /** Bytes to lowercase hex. */
  public static String hex(byte[] b) {
    StringBuilder sb = new StringBuilder();
    for (byte x : b) {
      sb.append(String.format("%02x", x & 0xff));
    }
    return sb.toString();
  }
}
