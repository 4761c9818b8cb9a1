package io.kvroute.assembly;

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
 * {@code models.<name>.tokenizer}: the one loader of local tokenizers for every front. Its own
 * class, so that nothing of the optional {@code kvroute-tokenizer-hf} (and DJL) is loaded unless a
 * tokenizer is set. Public for tools that load a gateway configuration's tokenizer without building
 * a router ({@code kvroute doctor}); needs {@code kvroute-tokenizer-hf} on the class path.
 */
public final class LocalTokenizers {
  private LocalTokenizers() {}

  /**
   * The model's local tokenizer, files resolved against {@code dir}.
   *
   * @param at the path of the tokenizer section, for messages
   * @throws ConfigException at {@code at.path} or {@code at.chatTemplate}
   */
  public static Tokenizer load(
      String at, String model, RouterSettings.LocalTokenizer t, Path dir, MeterRegistry meters) {
    HfTokenizer.Builder hb =
        HfTokenizer.builder()
            .path(RouterSettings.resolve(t.path(), dir))
            .revision(t.revision())
            .modelName(model)
            .meterRegistry(meters);
    if (t.chatTemplate() != null) {
      try {
        hb.chatTemplate(
            Files.readString(
                RouterSettings.resolve(t.chatTemplate(), dir), StandardCharsets.UTF_8));
      } catch (IOException e) {
        throw new ConfigException(at + ".chatTemplate", "cannot read: " + e.getMessage(), e);
      }
    }
    try {
      return hb.build();
    } catch (TokenizerLoadException e) {
      throw new ConfigException(at + ".path", e.getMessage(), e);
    }
  }
}
