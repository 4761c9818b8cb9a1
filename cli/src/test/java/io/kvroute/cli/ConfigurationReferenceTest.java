package io.kvroute.cli;

import io.kvroute.config.testing.ConfigReference;
import java.util.List;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/**
 * docs/configuration.md documents exactly the gateway's keys and the options of {@code gateway},
 * {@code proxy} and {@code serve}.
 */
class ConfigurationReferenceTest {
  private final ConfigReference doc = ConfigReference.load();

  @Test
  void gatewayKeys() {
    doc.assertSectionDocuments("`kvroute gateway`", GatewayConfig.BINDER.keys(GatewayConfig.class));
  }

  @Test
  void commandOptions() {
    doc.assertSectionDocuments("Options of `kvroute gateway`", options(new GatewayCommand()));
    doc.assertSectionDocuments("`kvroute proxy`", options(new ProxyCommand()));
    doc.assertSectionDocuments("Options of `kvroute serve`", options(new ServeCommand()));
  }

  private static List<String> options(Object command) {
    return new CommandLine(command)
        .getCommandSpec().options().stream()
            .filter(o -> !o.usageHelp() && !o.versionHelp())
            .map(CommandLine.Model.OptionSpec::longestName)
            .toList();
  }
}
