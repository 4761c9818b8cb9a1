package io.kvroute.tokenizer.hf.internal;

/** Text to token ids: the native library ({@link DjlEncoder}) or {@link ByteLevelBpe}. */
public interface TextEncoder extends AutoCloseable {

  /** The ids of {@code text}; {@code addSpecialTokens} applies the post-processor (BOS...). */
  int[] encode(String text, boolean addSpecialTokens);

  /** The text of {@code ids} (diagnostics). */
  String decode(int[] ids, boolean skipSpecialTokens);

  /** {@code native} or {@code java}, for logs and metric tags. */
  String engine();

  @Override
  void close();
}
