package io.kvroute.tokenizer.hf;

/**
 * A model's tokenizer files could not be found, read or loaded (a missing {@code tokenizer.json},
 * an unreadable {@code tokenizer_config.json}, a Hugging Face cache without the snapshot, or a
 * native library that cannot load on this platform). The message names the path.
 */
public final class TokenizerLoadException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** An exception with a message and a cause. */
  public TokenizerLoadException(String message, Throwable cause) {
    super(message, cause);
  }

  /** An exception with a message. */
  public TokenizerLoadException(String message) {
    super(message);
  }
}
