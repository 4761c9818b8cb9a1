package io.kvroute.scoring;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.config.ConfigBinder;
import io.kvroute.config.testing.ConfigReference;
import io.kvroute.scoring.internal.EndpointPickerConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/** docs/configuration.md documents exactly the scheduler's keys and kvroute's plugin parameters. */
class ConfigurationReferenceTest {
  private final ConfigReference doc = ConfigReference.load();
  private final ConfigBinder binder = ConfigBinder.create();

  @Test
  void endpointPickerConfigKeys() {
    doc.assertSectionDocuments(
        "Scheduler (`EndpointPickerConfig`)", binder.keys(EndpointPickerConfig.class));
  }

  @Test
  void everyBuiltInPluginAndItsParameters() {
    SchedulerConfigLoader loader = SchedulerConfigLoader.create();
    List<String> documented = doc.subsections("Plugins");
    assertThat(new TreeSet<>(documented))
        .as("plugin sections of docs/configuration.md")
        .isEqualTo(new TreeSet<>(loader.knownTypes().stream().map(t -> "`" + t + "`").toList()));
    List<String> checked = new ArrayList<>();
    for (String type : loader.knownTypes()) {
      Class<?> params = loader.provider(type).orElseThrow().parametersType();
      if (Map.class.isAssignableFrom(params)) {
        continue;
      }
      doc.assertSectionDocuments("`" + type + "`", binder.keys(params));
      checked.add(type);
    }
    assertThat(checked).hasSize(loader.knownTypes().size());
  }
}
