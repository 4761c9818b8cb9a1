package io.kvroute.kvindex.parity;

import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * The answer of {@link ParityCheck#diagnose}: whether the block hashes kvroute predicts for a
 * prompt are the ones the engine published, and if not, why, with the fix.
 *
 * <p>{@link #cause()} is the most fundamental problem found (in the order of {@link Cause}); {@link
 * #findings()} lists every problem found, each with a message and a fix a person can act on. The
 * facts behind them are exposed too: the predicted and matched block counts, the engine's hashing
 * when it could be identified, and the first token where kvroute's ids and the engine's differ.
 *
 * <p>Immutable and thread-safe.
 */
public final class ParityDiagnosis {

  /** Why the hashes do or do not match, most fundamental first. */
  public enum Cause {
    /** Every predicted block hash was published by the engine. */
    MATCH,
    /** Nothing to decide from: no hashes observed, or a prompt shorter than one block. */
    NO_EVIDENCE,
    /** The engine's events carry another {@code block_size} than the configured one. */
    BLOCK_SIZE,
    /** The engine hashes with another {@code --prefix-caching-hash-algo}. */
    HASH_ALGORITHM,
    /** The engine's {@code PYTHONHASHSEED} differs (or is unset where kvroute expects one). */
    HASH_SEED,
    /** Both the algorithm and the seed differ. */
    HASH_ALGORITHM_AND_SEED,
    /**
     * The engine's token ids for the prompt differ from kvroute's: chat template, special tokens,
     * tokenizer files or template options.
     */
    TOKENS,
    /**
     * Some predicted blocks were published and the rest not (yet): blocks already cached before,
     * evicted, not yet reported, or tokens that differ after the matched prefix.
     */
    PARTIAL,
    /** No hash matches and no candidate explains it. */
    UNEXPLAINED
  }

  /**
   * One problem found.
   *
   * @param cause what kind of problem
   * @param message what was observed, for a person
   * @param fix what to change, for a person
   */
  public record Finding(Cause cause, String message, String fix) {
    /** Validates that every field is present. */
    public Finding {
      Objects.requireNonNull(cause, "cause");
      Objects.requireNonNull(message, "message");
      Objects.requireNonNull(fix, "fix");
    }
  }

  private final HashSettings configured;
  private final List<Finding> findings;
  private final Cause cause;
  private final int predictedBlocks;
  private final int matchedBlocks;
  private final HashSettings engineSettings;
  private final Integer engineBlockSize;
  private final int firstTokenMismatch;
  private final String matchMessage;

  ParityDiagnosis(
      HashSettings configured,
      String matchMessage,
      Cause cause,
      List<Finding> findings,
      int predictedBlocks,
      int matchedBlocks,
      Integer engineBlockSize,
      HashSettings engineSettings,
      int firstTokenMismatch) {
    this.configured = configured;
    this.matchMessage = matchMessage;
    this.cause = cause;
    this.findings = List.copyOf(findings);
    this.predictedBlocks = predictedBlocks;
    this.matchedBlocks = matchedBlocks;
    this.engineBlockSize = engineBlockSize;
    this.engineSettings = engineSettings;
    this.firstTokenMismatch = firstTokenMismatch;
  }

  /** The most fundamental cause found ({@link Cause#MATCH} when parity holds). */
  public Cause cause() {
    return cause;
  }

  /** True when every predicted block hash was published by the engine. */
  public boolean matches() {
    return cause == Cause.MATCH;
  }

  /** Every problem found, most fundamental first; empty when parity holds. */
  public List<Finding> findings() {
    return findings;
  }

  /** The first finding's message, or a sentence saying parity holds. */
  public String message() {
    return findings.isEmpty() ? matchMessage : findings.get(0).message();
  }

  /** The first finding's fix, or {@code "none needed"}. */
  public String fix() {
    return findings.isEmpty() ? "none needed" : findings.get(0).fix();
  }

  /** The settings kvroute was configured with. */
  public HashSettings configured() {
    return configured;
  }

  /** Full blocks of the prompt hashed with the configured settings. */
  public int predictedBlocks() {
    return predictedBlocks;
  }

  /** How many of those the engine published. */
  public int matchedBlocks() {
    return matchedBlocks;
  }

  /** {@link #matchedBlocks()} over {@link #predictedBlocks()}; 0 when nothing was predicted. */
  public double ratio() {
    return predictedBlocks == 0 ? 0 : (double) matchedBlocks / predictedBlocks;
  }

  /** The block size the engine's events carry (the most frequent one), if any were observed. */
  public OptionalInt engineBlockSize() {
    return engineBlockSize == null ? OptionalInt.empty() : OptionalInt.of(engineBlockSize);
  }

  /**
   * The engine's hashing (block size, algorithm, seed), when a candidate reproduced at least one of
   * its published hashes.
   */
  public Optional<HashSettings> engineSettings() {
    return Optional.ofNullable(engineSettings);
  }

  /**
   * The first token index where kvroute's ids and the engine's differ (the shorter length when one
   * is a prefix of the other), when the engine's ids were known and differ.
   */
  public OptionalInt firstTokenMismatch() {
    return firstTokenMismatch < 0 ? OptionalInt.empty() : OptionalInt.of(firstTokenMismatch);
  }

  @Override
  public String toString() {
    StringBuilder sb =
        new StringBuilder("ParityDiagnosis{")
            .append(cause)
            .append(", matched ")
            .append(matchedBlocks)
            .append('/')
            .append(predictedBlocks);
    for (Finding f : findings) {
      sb.append("; ").append(f.cause()).append(": ").append(f.message());
    }
    return sb.append('}').toString();
  }
}
