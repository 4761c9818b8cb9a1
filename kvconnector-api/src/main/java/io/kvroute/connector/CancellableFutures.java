package io.kvroute.connector;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;

/**
 * Composition of {@link CompletableFuture}s that keeps the cancellation contract of {@link
 * KVConnector}: cancelling the result cancels whichever stage is in flight, and a {@link
 * StreamingResponse} that arrives after the caller gave up is cancelled rather than leaked (it
 * would hold a connection until its timeout).
 *
 * <p>Stateless and thread-safe.
 */
public final class CancellableFutures {
  private CancellableFutures() {}

  /**
   * {@code first.thenCompose(next)}, except that cancelling the result also cancels the stage in
   * flight (plain {@code thenCompose} does not propagate cancellation upstream), and a {@link
   * StreamingResponse} that arrives after cancellation is cancelled rather than leaked.
   */
  public static <A, B> CompletableFuture<B> compose(
      CompletableFuture<A> first, Function<A, CompletableFuture<B>> next) {
    CompletableFuture<B> result = new CompletableFuture<>();
    AtomicReference<CompletableFuture<?>> current = new AtomicReference<>(first);
    result.whenComplete(
        (r, t) -> {
          if (result.isCancelled()) {
            current.get().cancel(true);
          }
        });
    first.whenComplete(
        (a, t) -> {
          if (t != null) {
            result.completeExceptionally(unwrap(t));
            return;
          }
          if (result.isDone()) {
            if (a instanceof StreamingResponse r) {
              r.cancel();
            }
            return;
          }
          CompletableFuture<B> second;
          try {
            second = next.apply(a);
          } catch (RuntimeException e) {
            result.completeExceptionally(e);
            return;
          }
          current.set(second);
          if (result.isCancelled()) {
            second.cancel(true);
            return;
          }
          second.whenComplete(
              (b, t2) -> {
                if (t2 != null) {
                  result.completeExceptionally(unwrap(t2));
                } else if (!result.complete(b) && b instanceof StreamingResponse r) {
                  r.cancel();
                }
              });
        });
    return result;
  }

  /** Unwraps {@link CompletionException}s down to their cause. */
  public static Throwable unwrap(Throwable t) {
    Throwable x = t;
    while (x instanceof CompletionException && x.getCause() != null) {
      x = x.getCause();
    }
    return x;
  }
}
