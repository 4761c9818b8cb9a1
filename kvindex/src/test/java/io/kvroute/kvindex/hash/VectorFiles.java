package io.kvroute.kvindex.hash;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

/** Locates and reads the golden vectors in {@code shared/vectors}. */
final class VectorFiles {
  private static final ObjectMapper MAPPER = new ObjectMapper();

  private VectorFiles() {}

  /** Walks up from the module base directory until a {@code shared/vectors} directory is found. */
  static Path dir() {
    String base = System.getProperty("basedir", System.getProperty("user.dir"));
    Path start = Paths.get(base).toAbsolutePath();
    for (Path p = start; p != null; p = p.getParent()) {
      Path v = p.resolve("shared").resolve("vectors");
      if (Files.isDirectory(v)) {
        return v;
      }
    }
    throw new IllegalStateException(
        "golden vectors not found: no shared/vectors directory in "
            + start
            + " or any parent; the kvroute tests need the project's shared/vectors checkout");
  }

  static JsonNode read(String name) {
    Path f = dir().resolve(name);
    try {
      return MAPPER.readTree(f.toFile());
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read vector file " + f, e);
    }
  }
}
