package io.kvroute.examples;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import org.junit.jupiter.api.Test;

/** The documentation shows these examples verbatim. */
class DocsExamplesTest {
  private static final Path MODULE =
      Paths.get(System.getProperty("basedir", System.getProperty("user.dir")));

  /** The lines of {@code file} between its {@code marker:begin} and {@code marker:end} lines. */
  static String between(Path file, String marker) throws IOException {
    String source = Files.readString(file, StandardCharsets.UTF_8);
    int begin = source.indexOf("// " + marker + ":begin");
    int end = source.indexOf("// " + marker + ":end");
    assertThat(begin).as("%s has its %s markers", file, marker).isNotNegative();
    return source.substring(source.indexOf('\n', begin) + 1, end);
  }

  @Test
  void theTestkitPageShowsTheTestkitExampleVerbatim() throws IOException {
    String snippet =
        between(
            MODULE.resolve("src/test/java/io/kvroute/examples/TestkitExampleTest.java"),
            "docs/testkit.md");
    String doc = Files.readString(MODULE.resolve("../docs/testkit.md"), StandardCharsets.UTF_8);
    assertThat(doc)
        .as("docs/testkit.md must show TestkitExampleTest.java between its markers verbatim")
        .contains("```java\n" + snippet + "```");
  }
}
