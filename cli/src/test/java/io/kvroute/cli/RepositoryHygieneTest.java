package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Checks over the whole repository that keep a fresh clone self-sufficient: nothing reaches for a
 * folder outside the clone, and the BOM lists exactly the artifacts the build produces.
 */
class RepositoryHygieneTest {
  private static final Path ROOT =
      Paths.get(System.getProperty("basedir", System.getProperty("user.dir")))
          .toAbsolutePath()
          .getParent();
  private static final Pattern MODULE = Pattern.compile("<module>([^<]+)</module>");
  private static final Pattern ARTIFACT = Pattern.compile("<artifactId>([^<]+)</artifactId>");
  private static final Set<String> UNPUBLISHED =
      Set.of(
          "examples",
          "examples/spring-cloud-gateway-sample",
          "examples/custom-connector",
          "benchmarks",
          "architecture-tests");

  private static String read(Path p) {
    try {
      return Files.readString(p, StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new AssertionError("cannot read " + p, e);
    }
  }

  @Test
  void nothingInTheBuildOrTheTestsReadsOutsideTheRepository() throws IOException {
    // Built from pieces so that this file does not match itself.
    String parent = ".." + "/";
    List<String> offenders = new ArrayList<>();
    try (Stream<Path> files = Files.walk(ROOT)) {
      files
          .filter(Files::isRegularFile)
          .filter(p -> !p.toString().contains("/target") && !p.toString().contains("/.git/"))
          .filter(
              p -> {
                String n = p.getFileName().toString();
                return n.endsWith(".java")
                    || n.equals("pom.xml")
                    || n.endsWith(".properties")
                    || n.endsWith(".sh");
              })
          .forEach(
              p -> {
                String text = read(p);
                if (text.contains(parent + "shared") || text.contains("shared" + "/vectors")) {
                  offenders.add(ROOT.relativize(p).toString());
                }
              });
    }
    assertThat(offenders)
        .as("files that reach for a folder beside the clone (copy the data into the repository)")
        .isEmpty();
  }

  @Test
  void theBomListsExactlyTheArtifactsTheBuildProduces() {
    Set<String> produced = new TreeSet<>();
    Matcher m = MODULE.matcher(read(ROOT.resolve("pom.xml")));
    while (m.find()) {
      String module = m.group(1);
      if (UNPUBLISHED.contains(module) || module.equals("kvroute-bom")) {
        continue;
      }
      String pom = read(ROOT.resolve(module).resolve("pom.xml"));
      String project = pom.substring(pom.indexOf("</parent>"));
      Matcher a = ARTIFACT.matcher(project);
      assertThat(a.find()).isTrue();
      produced.add(a.group(1));
      if (pom.contains("<goal>test-jar</goal>")) {
        produced.add(a.group(1) + ":test-jar");
      }
    }
    Set<String> listed = new TreeSet<>();
    String bom = read(ROOT.resolve("kvroute-bom/pom.xml"));
    Matcher d =
        Pattern.compile(
                "<dependency><groupId>io\\.kvroute</groupId><artifactId>([^<]+)</artifactId>"
                    + "<version>[^<]+</version>(?:<type>([^<]+)</type>)?")
            .matcher(bom);
    while (d.find()) {
      listed.add(d.group(2) == null ? d.group(1) : d.group(1) + ":" + d.group(2));
    }
    assertThat(listed).as("kvroute-bom/pom.xml").isEqualTo(produced);
  }

  /**
   * The README's clone command uses the repository URL of the poms' {@code <scm>}, an explicit
   * placeholder (a reserved example domain) until kvroute has a public repository, and the parent
   * pom and the BOM agree on it.
   */
  @Test
  void theCloneCommandUsesThePomsRepositoryUrl() {
    Pattern connection = Pattern.compile("<connection>scm:git:([^<]+)</connection>");
    Matcher parent = connection.matcher(read(ROOT.resolve("pom.xml")));
    Matcher bom = connection.matcher(read(ROOT.resolve("kvroute-bom/pom.xml")));
    assertThat(parent.find()).isTrue();
    assertThat(bom.find()).isTrue();
    assertThat(bom.group(1)).isEqualTo(parent.group(1));
    assertThat(read(ROOT.resolve("README.md"))).contains("git clone " + parent.group(1) + " ");
    assertThat(parent.group(1)).as("an explicit placeholder").contains("example.");
  }
}
