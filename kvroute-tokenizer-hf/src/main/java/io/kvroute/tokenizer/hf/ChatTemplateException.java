package io.kvroute.tokenizer.hf;

/**
 * A chat template could not be parsed or rendered, or it rejected the conversation through its own
 * {@code raise_exception(...)} (whose message is this exception's message, as vLLM reports it in a
 * 400 response).
 */
public final class ChatTemplateException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** An exception with a message. */
  public ChatTemplateException(String message) {
    super(message, null, false, false);
  }
}
