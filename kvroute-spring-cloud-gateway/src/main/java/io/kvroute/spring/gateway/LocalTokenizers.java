package io.kvroute.spring.gateway;

import io.kvroute.config.ConfigException;
import io.kvroute.scoring.Tokenizer;
import io.kvroute.tokenizer.hf.HfTokenizer;
import io.kvroute.tokenizer.hf.TokenizerLoadException;
import io.micrometer.core.instrument.MeterRegistry;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Loads {@code kvroute-tokenizer-hf} tokenizers. Its own class so that nothing of the optional
 * dependency is loaded unless a {@code tokenizer} property is set.
 */
final class LocalTokenizers {
  private LocalTokenizers() {}

  /**
   * The model's local tokenizer.
   *
   * @param at the property path of the tokenizer section, for messages
   * @throws ConfigException at {@code at.path} or {@code at.chat-template}
   */
  static Tokenizer load(
      String at, String model, KvRouteProperties.LocalTokenizer t, MeterRegistry meters) {
    HfTokenizer.Builder hb =
        HfTokenizer.builder()
            .path(Path.of(t.getPath()))
            .revision(t.getRevision())
            .modelName(model)
            .meterRegistry(meters);
    if (t.getChatTemplate() != null) {
      try {
        hb.chatTemplate(Files.readString(Path.of(t.getChatTemplate()), StandardCharsets.UTF_8));
      } catch (IOException e) {
        throw new ConfigException(at + ".chat-template", "cannot read: " + e.getMessage(), e);
      }
    }
    try {
      return hb.build();
    } catch (TokenizerLoadException e) {
      throw new ConfigException(at + ".path", e.getMessage(), e);
    }
  }
}
