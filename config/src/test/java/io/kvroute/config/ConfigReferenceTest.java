package io.kvroute.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.config.testing.ConfigReference;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ConfigReferenceTest {
  @Test
  void readsTheKeysOfOneSection(@TempDir Path dir) throws Exception {
    Path doc = dir.resolve("configuration.md");
    Files.writeString(
        doc,
        """
        # Reference
        ## `kvroute gateway`
        | Key | Type | Default | Meaning |
        |---|---|---|---|
        | `listen.host` | string | `127.0.0.1` | address |
        | `listen.port` | integer | `8080` | port |
        ### Example
        | `endpoints[].url` | string | | URL |
        ## `kvroute serve`
        | `model` | string | | the model |
        """);
    ConfigReference r = ConfigReference.load(doc);
    assertThat(r.keys("`kvroute gateway`")).containsExactly("listen.host", "listen.port");
    assertThat(r.keys("Example")).containsExactly("endpoints[].url");
    assertThat(r.keys("`kvroute serve`")).containsExactly("model");
    assertThat(r.subsections("`kvroute gateway`")).containsExactly("Example");
    assertThat(r.subsections("Reference")).containsExactly("`kvroute gateway`", "`kvroute serve`");
    r.assertSectionDocuments("`kvroute serve`", List.of("model"));
    assertThatThrownBy(
            () -> r.assertSectionDocuments("`kvroute serve`", List.of("model", "pods_file")))
        .hasMessageContaining("not documented: [pods_file]");
    assertThatThrownBy(() -> r.assertSectionDocuments("`kvroute serve`", List.of()))
        .hasMessageContaining("documented but not in the configuration: [model]");
    assertThatThrownBy(() -> r.keys("nope")).hasMessageContaining("no section \"nope\"");
  }
}
