package io.kvroute.service;

import io.kvroute.config.ConfigBinder;
import io.kvroute.config.testing.ConfigReference;
import io.kvroute.service.internal.ServiceFile;
import org.junit.jupiter.api.Test;

/** docs/configuration.md documents exactly the keys of {@code kvroute serve}'s file. */
class ConfigurationReferenceTest {
  @Test
  void serveKeys() {
    ConfigReference.load()
        .assertSectionDocuments(
            "`kvroute serve`", ConfigBinder.snakeCase().keys(ServiceFile.class));
  }
}
