package io.kvroute.scoring;

import java.util.concurrent.CompletionStage;

/**
 * Turns a request's prompt (text or chat messages) into the engine's token ids, so the precise
 * prefix scorer can compute request keys. See {@link Tokenizers} for vLLM's {@code /tokenize}.
 *
 * <p>Implementations must be thread-safe and must not block the caller: do I/O asynchronously and
 * complete the stage from another thread. A failed or late stage is not fatal: {@link
 * Scheduler#pickAsync} then schedules without token ids (the approximate index takes over).
 */
@FunctionalInterface
public interface Tokenizer {

  /** The token ids of the request's prompt; completes exceptionally on failure. */
  CompletionStage<int[]> tokenize(SchedulingRequest request);
}
