package com.example.kvconnector;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import org.junit.jupiter.api.Test;

/** docs/connectors.md shows this example's files verbatim. */
class ConnectorsDocTest {
  private static final Path MODULE =
      Paths.get(System.getProperty("basedir", System.getProperty("user.dir")));

  private static String read(String path) throws IOException {
    return Files.readString(MODULE.resolve(path), StandardCharsets.UTF_8);
  }

  @Test
  void theConnectorsPageShowsTheseFilesVerbatim() throws IOException {
    String doc = read("../../docs/connectors.md");
    for (String file :
        new String[] {
          "src/main/java/com/example/kvconnector/KeyedStoreConnector.java",
          "src/test/java/com/example/kvconnector/KeyedStoreConnectorTest.java",
          "src/main/resources/META-INF/services/io.kvroute.connector.KVConnectorProvider"
        }) {
      assertThat(doc).as("docs/connectors.md shows %s verbatim", file).contains(read(file));
    }
    String pom = read("pom.xml");
    String deps =
        pom.substring(
            pom.indexOf('\n', pom.indexOf("<!-- docs/connectors.md:dependencies:begin -->")) + 1,
            pom.indexOf("    <!-- docs/connectors.md:dependencies:end -->"));
    assertThat(doc)
        .as("docs/connectors.md shows the pom's dependencies (un-indented by four spaces)")
        .contains(deps.replaceAll("(?m)^    ", ""));
  }
}
