package io.kvroute.tokenizer.hf.internal;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.djl.huggingface.tokenizers.jni.TokenizersLibrary;
import io.kvroute.tokenizer.hf.TokenizerLoadException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * The Hugging Face {@code tokenizers} library (Rust) through DJL's JNI binding, configured as vLLM
 * uses it: no truncation, no padding, special tokens added only when asked.
 *
 * <p>DJL's jar bundles the native library for linux-x86_64 and linux-aarch64 (also osx-aarch64 and
 * win-x86_64); it is extracted once to {@code ~/.djl.ai/tokenizers/} (or {@code $DJL_CACHE_DIR} /
 * {@code $ENGINE_CACHE_DIR}) and nothing is downloaded. Before the first load this class turns off
 * DJL's start-up telemetry (which probes the cloud metadata address 169.254.169.254) and its
 * downloads by setting the {@code OPT_OUT_TRACKING} and {@code ai.djl.offline} system properties,
 * unless the process already chose otherwise through the environment or the properties.
 *
 * <p>Thread-safe: the Rust tokenizer encodes concurrently from many threads; {@link #close} waits
 * for encodes in progress.
 */
public final class DjlEncoder implements TextEncoder {

  static {
    quietDjl();
  }

  private final HuggingFaceTokenizer tokenizer;
  private final long handle;
  private final ReentrantReadWriteLock lifecycle = new ReentrantReadWriteLock();
  private boolean closed;

  private DjlEncoder(HuggingFaceTokenizer tokenizer) {
    this.tokenizer = tokenizer;
    this.handle = tokenizer.getHandle();
  }

  /** Sets DJL's opt-outs unless the environment or a system property already decided. */
  static void quietDjl() {
    if (System.getenv("OPT_OUT_TRACKING") == null
        && System.getProperty("OPT_OUT_TRACKING") == null) {
      System.setProperty("OPT_OUT_TRACKING", "true");
    }
    if (System.getenv("DJL_OFFLINE") == null && System.getProperty("ai.djl.offline") == null) {
      System.setProperty("ai.djl.offline", "true");
    }
  }

  /**
   * Loads a {@code tokenizer.json}.
   *
   * @throws TokenizerLoadException if the file is unreadable or the native library cannot load
   */
  public static DjlEncoder load(Path tokenizerJson) {
    String json;
    try {
      json = Files.readString(tokenizerJson, StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new TokenizerLoadException("cannot read " + tokenizerJson + ": " + e.getMessage(), e);
    }
    return fromJson(json, tokenizerJson.toString());
  }

  /** Loads a tokenizer from its JSON text ({@code source} names it in errors). */
  public static DjlEncoder fromJson(String json, String source) {
    Map<String, String> options = new HashMap<>();
    options.put("addSpecialTokens", "true");
    options.put("truncation", "false");
    options.put("padding", "false");
    try (var in = new java.io.ByteArrayInputStream(json.getBytes(StandardCharsets.UTF_8))) {
      return new DjlEncoder(HuggingFaceTokenizer.newInstance(in, options));
    } catch (IOException | RuntimeException | UnsatisfiedLinkError e) {
      throw new TokenizerLoadException(
          "cannot load the Hugging Face tokenizer "
              + source
              + " (DJL tokenizers "
              + "native library): "
              + e,
          e);
    }
  }

  @Override
  public String engine() {
    return "native";
  }

  @Override
  public int[] encode(String text, boolean addSpecialTokens) {
    lifecycle.readLock().lock();
    try {
      if (closed) {
        throw new IllegalStateException("the tokenizer is closed");
      }
      long encoding = TokenizersLibrary.LIB.encode(handle, text, addSpecialTokens);
      try {
        long[] ids = TokenizersLibrary.LIB.getTokenIds(encoding);
        int[] out = new int[ids.length];
        for (int i = 0; i < ids.length; i++) {
          out[i] = (int) ids[i];
        }
        return out;
      } finally {
        TokenizersLibrary.LIB.deleteEncoding(encoding);
      }
    } finally {
      lifecycle.readLock().unlock();
    }
  }

  @Override
  public String decode(int[] ids, boolean skipSpecialTokens) {
    long[] l = new long[ids.length];
    for (int i = 0; i < ids.length; i++) {
      l[i] = ids[i];
    }
    lifecycle.readLock().lock();
    try {
      if (closed) {
        throw new IllegalStateException("the tokenizer is closed");
      }
      return tokenizer.decode(l, skipSpecialTokens);
    } finally {
      lifecycle.readLock().unlock();
    }
  }

  @Override
  public void close() {
    lifecycle.writeLock().lock();
    try {
      if (!closed) {
        closed = true;
        tokenizer.close();
      }
    } finally {
      lifecycle.writeLock().unlock();
    }
  }
}
