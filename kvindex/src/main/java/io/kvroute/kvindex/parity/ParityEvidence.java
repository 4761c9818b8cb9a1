package io.kvroute.kvindex.parity;

import io.kvroute.kvindex.event.EngineHashes;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.hash.BlockExtraKeys;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;

/**
 * What is known about one prompt and one engine, for {@link ParityCheck#diagnose}: the token ids
 * kvroute computed for the prompt (and the request's extra keys), optionally the engine's own token
 * ids for the same prompt ({@code /tokenize}, the render endpoints, or a {@code BlockStored}
 * event's {@code token_ids}), and what the engine published in its KV events: block hashes, block
 * sizes, and whole {@code BlockStored} events (whose own tokens let the diagnosis identify the
 * engine's hashing independently of kvroute's tokenization).
 *
 * <p>Bounded: at most {@link #MAX_HASHES} observed hashes and {@link #MAX_EVENTS} events are kept
 * (further ones are counted in {@link #dropped()}). Immutable and thread-safe once built; token
 * arrays are copied in.
 */
public final class ParityEvidence {
  /** Observed hashes kept (further ones are dropped and counted). */
  public static final int MAX_HASHES = 65_536;

  /** {@code BlockStored} events kept for the self-check (further ones are dropped and counted). */
  public static final int MAX_EVENTS = 256;

  private final int[] promptTokens;
  private final BlockExtraKeys extraKeys;
  private final int[] engineTokens;
  private final String engineTokensSource;
  private final Set<Long> hashes;
  private final Map<Integer, Integer> blockSizes;
  private final List<KvEvent.BlockStored> events;
  private final long dropped;

  private ParityEvidence(Builder b) {
    this.promptTokens = b.promptTokens;
    this.extraKeys = b.extraKeys;
    this.engineTokens = b.engineTokens;
    this.engineTokensSource = b.engineTokensSource;
    this.hashes = Collections.unmodifiableSet(new HashSet<>(b.hashes));
    this.blockSizes = Collections.unmodifiableMap(new LinkedHashMap<>(b.blockSizes));
    this.events = List.copyOf(b.events);
    this.dropped = b.dropped;
  }

  /** A builder with nothing observed. */
  public static Builder builder() {
    return new Builder();
  }

  /** A copy of kvroute's token ids for the prompt, if given. */
  public Optional<int[]> promptTokens() {
    return Optional.ofNullable(promptTokens).map(int[]::clone);
  }

  int[] promptTokensUnsafe() {
    return promptTokens;
  }

  /** The request's extra keys (LoRA, cache salt, multimodal items). */
  public BlockExtraKeys extraKeys() {
    return extraKeys;
  }

  /** A copy of the engine's own token ids for the prompt, if given. */
  public Optional<int[]> engineTokens() {
    return Optional.ofNullable(engineTokens).map(int[]::clone);
  }

  int[] engineTokensUnsafe() {
    return engineTokens;
  }

  /** Where the engine's token ids come from ({@code "/tokenize"}, {@code "render"}, ...). */
  public String engineTokensSource() {
    return engineTokensSource;
  }

  /** The block hashes the engine published (event form: unsigned 64-bit in long bits). */
  public Set<Long> observedHashes() {
    return hashes;
  }

  /** The block sizes of the events, with how many events carried each (token-less 0 excluded). */
  public Map<Integer, Integer> observedBlockSizes() {
    return blockSizes;
  }

  /** The {@code BlockStored} events kept (at most {@link #MAX_EVENTS}). */
  public List<KvEvent.BlockStored> storedEvents() {
    return events;
  }

  /** Hashes and events left out because a bound was reached. */
  public long dropped() {
    return dropped;
  }

  @Override
  public String toString() {
    return "ParityEvidence{promptTokens="
        + (promptTokens == null ? "none" : promptTokens.length)
        + ", engineTokens="
        + (engineTokens == null ? "none" : engineTokens.length + " from " + engineTokensSource)
        + ", hashes="
        + hashes.size()
        + ", blockSizes="
        + blockSizes
        + ", events="
        + events.size()
        + "}";
  }

  /** Builder of {@link ParityEvidence}; not thread-safe. */
  public static final class Builder {
    private int[] promptTokens;
    private BlockExtraKeys extraKeys = BlockExtraKeys.NONE;
    private int[] engineTokens;
    private String engineTokensSource = "the engine";
    private final Set<Long> hashes = new HashSet<>();
    private final Map<Integer, Integer> blockSizes = new LinkedHashMap<>();
    private final List<KvEvent.BlockStored> events = new ArrayList<>();
    private long dropped;

    private Builder() {}

    /** kvroute's token ids for the prompt (copied). */
    public Builder promptTokens(int[] tokens) {
      this.promptTokens = tokens == null ? null : tokens.clone();
      return this;
    }

    /** The request's extra keys (default {@link BlockExtraKeys#NONE}). */
    public Builder extraKeys(BlockExtraKeys extraKeys) {
      this.extraKeys = Objects.requireNonNull(extraKeys, "extraKeys");
      return this;
    }

    /**
     * The engine's own token ids for the same prompt (copied), and where they come from ({@code
     * "/tokenize"}, {@code "render"}, {@code "KV events"}).
     */
    public Builder engineTokens(int[] tokens, String source) {
      this.engineTokens = tokens == null ? null : tokens.clone();
      this.engineTokensSource = Objects.requireNonNull(source, "source");
      return this;
    }

    /** Block hashes the engine published (event form). */
    public Builder observedHashes(long... u64) {
      for (long h : u64) {
        if (hashes.size() >= MAX_HASHES) {
          dropped++;
        } else {
          hashes.add(h);
        }
      }
      return this;
    }

    /** Block hashes the engine published, as an event carries them. */
    public Builder observedHashes(EngineHashes hashes) {
      for (int i = 0; i < hashes.size(); i++) {
        observedHashes(hashes.get(i));
      }
      return this;
    }

    /** A block size the engine's events carry ({@code 0}, a token-less offload event, ignored). */
    public Builder observedBlockSize(int blockSize) {
      if (blockSize > 0) {
        blockSizes.merge(blockSize, 1, Integer::sum);
      }
      return this;
    }

    /**
     * A {@code BlockStored} event: its hashes and block size, and the event itself (kept up to
     * {@link #MAX_EVENTS}) so the diagnosis can hash its own tokens.
     */
    public Builder storedEvent(KvEvent.BlockStored event) {
      observedHashes(event.blockHashes());
      observedBlockSize(event.blockSize());
      if (events.size() >= MAX_EVENTS) {
        dropped++;
      } else {
        events.add(event);
      }
      return this;
    }

    /** Builds the evidence. */
    public ParityEvidence build() {
      return new ParityEvidence(this);
    }
  }
}
