package io.kvroute.kvindex.hybrid;

import io.kvroute.kvindex.event.KvEvent;
import java.util.Locale;
import java.util.Objects;

/**
 * What a pod's KV events say of one of its KV-cache groups: the kind of attention (from {@code
 * kv_cache_spec_kind}), the group's block size in tokens and, for a sliding-window group, the
 * window in tokens ({@code kv_cache_spec_sliding_window}).
 *
 * <p>vLLM's kinds map to three prefix-cache behaviours: {@code full_attention}, {@code
 * mla_attention}, {@code sink_full_attention} and any kind this class does not know are {@link
 * Kind#FULL_ATTENTION} (a hit needs every block of the prefix: the conservative reading); {@code
 * sliding_window} and {@code sliding_window_mla} with a window are {@link Kind#SLIDING_WINDOW} (a
 * hit needs the blocks inside the window before the prefix's end); {@code mamba} is {@link
 * Kind#MAMBA} (a hit needs the state cached at the prefix's last block).
 *
 * <p>Immutable; thread-safe.
 */
public final class GroupSpec {

  /** The prefix-cache behaviour of a KV-cache group. */
  public enum Kind {
    /** vLLM's {@code FullAttentionManager}: every block of the prefix. */
    FULL_ATTENTION,
    /** vLLM's {@code SlidingWindowManager}: the blocks inside the window before the end. */
    SLIDING_WINDOW,
    /** vLLM's {@code MambaManager}: the block holding the state at the end. */
    MAMBA
  }

  private final Kind kind;
  private final int blockSize;
  private final int slidingWindow;

  private GroupSpec(Kind kind, int blockSize, int slidingWindow) {
    this.kind = kind;
    this.blockSize = blockSize;
    this.slidingWindow = slidingWindow;
  }

  /**
   * A full-attention group of {@code blockSize}-token blocks.
   *
   * @throws IllegalArgumentException if {@code blockSize < 1}
   */
  public static GroupSpec fullAttention(int blockSize) {
    return new GroupSpec(Kind.FULL_ATTENTION, checkBlockSize(blockSize), 0);
  }

  /**
   * A sliding-window group of {@code blockSize}-token blocks with a window of {@code window}
   * tokens.
   *
   * @throws IllegalArgumentException if {@code blockSize < 1} or {@code window < 1}
   */
  public static GroupSpec slidingWindow(int blockSize, int window) {
    if (window < 1) {
      throw new IllegalArgumentException("slidingWindow must be >= 1, was " + window);
    }
    return new GroupSpec(Kind.SLIDING_WINDOW, checkBlockSize(blockSize), window);
  }

  /**
   * A mamba (state-space) group of {@code blockSize}-token blocks.
   *
   * @throws IllegalArgumentException if {@code blockSize < 1}
   */
  public static GroupSpec mamba(int blockSize) {
    return new GroupSpec(Kind.MAMBA, checkBlockSize(blockSize), 0);
  }

  /**
   * The spec a {@code BlockStored} event describes, from its {@code kv_cache_spec_kind}, {@code
   * kv_cache_spec_sliding_window} and {@code block_size}.
   *
   * @param kind the event's kind ({@code null}: full attention, as before vLLM sent it)
   * @param window the event's window, or {@code null} (a sliding kind without one is read as full
   *     attention)
   * @throws IllegalArgumentException if {@code blockSize < 1}
   */
  public static GroupSpec of(String kind, Integer window, int blockSize) {
    checkBlockSize(blockSize);
    if (kind != null) {
      String k = kind.toLowerCase(Locale.ROOT);
      if (k.equals("mamba")) {
        return mamba(blockSize);
      }
      if (k.startsWith("sliding_window") && window != null && window > 0) {
        return slidingWindow(blockSize, window);
      }
    }
    return fullAttention(blockSize);
  }

  /** The spec of {@code event}'s group ({@link #of(String, Integer, int)}). */
  public static GroupSpec of(KvEvent.BlockStored event) {
    return of(event.kvCacheSpecKind(), event.kvCacheSpecSlidingWindow(), event.blockSize());
  }

  private static int checkBlockSize(int blockSize) {
    if (blockSize < 1) {
      throw new IllegalArgumentException("blockSize must be >= 1, was " + blockSize);
    }
    return blockSize;
  }

  /** The prefix-cache behaviour. */
  public Kind kind() {
    return kind;
  }

  /** Block size in tokens. */
  public int blockSize() {
    return blockSize;
  }

  /** The window in tokens of a {@link Kind#SLIDING_WINDOW} group, 0 for the other kinds. */
  public int slidingWindow() {
    return slidingWindow;
  }

  /** Whether this spec equals the one an event with these fields describes (no allocation). */
  boolean sameAs(String eventKind, Integer window, int eventBlockSize) {
    if (eventBlockSize != blockSize) {
      return false;
    }
    if (eventKind == null || eventKind.equals("full_attention")) {
      return kind == Kind.FULL_ATTENTION;
    }
    return equals(of(eventKind, window, eventBlockSize));
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof GroupSpec g
        && g.kind == kind
        && g.blockSize == blockSize
        && g.slidingWindow == slidingWindow;
  }

  @Override
  public int hashCode() {
    return Objects.hash(kind, blockSize, slidingWindow);
  }

  @Override
  public String toString() {
    String k = kind.name().toLowerCase(Locale.ROOT);
    return kind == Kind.SLIDING_WINDOW
        ? k + "(blockSize=" + blockSize + ", window=" + slidingWindow + ")"
        : k + "(blockSize=" + blockSize + ")";
  }
}
