package io.kvroute.scoring;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * A {@link Tokenizer} that tries, in order: the ids the caller put on the request; the local
 * tokenizer configured for the request's model (for example {@code kvroute-tokenizer-hf}'s {@code
 * HfTokenizer}); and, when the model has no local tokenizer or it failed and the model allows it, a
 * remote fallback (typically {@link Tokenizers#vllm()}, the engines' {@code /tokenize}).
 *
 * <p>With a local tokenizer for every served model the engines receive no {@code /tokenize}
 * traffic. Local tokenizers are chosen by the request's base {@link SchedulingRequest#model()}
 * (LoRA adapters share their base model's tokenizer).
 *
 * <p>Metrics (with {@link Builder#meterRegistry}): {@code kvroute.tokenizer.requests} (counter,
 * tags {@code source} = {@code caller} | {@code local} | {@code remote}, {@code outcome} = {@code
 * success} | {@code failure}), {@code kvroute.tokenizer.duration} (timer, tag {@code source}) and
 * {@code kvroute.tokenizer.fallbacks} (counter: local failures answered remotely).
 *
 * <p>Immutable and thread-safe; stages complete on whichever thread the chosen tokenizer completes
 * them.
 */
public final class TokenizerChain implements Tokenizer {

  /** How one model is tokenized locally. */
  private record Local(Tokenizer tokenizer, boolean remoteFallback) {}

  private final Map<String, Local> locals;
  private final Tokenizer remote;
  private final LongSupplier nanoClock;
  private final Meters meters;

  private TokenizerChain(Builder b) {
    this.locals = Map.copyOf(b.locals);
    this.remote = b.remote;
    this.nanoClock = b.nanoClock;
    this.meters = b.registry == null ? null : new Meters(b.registry);
  }

  /** A new builder. */
  public static Builder builder() {
    return new Builder();
  }

  /** True when {@code model} has a local tokenizer. */
  public boolean hasLocal(String model) {
    return locals.containsKey(model);
  }

  @Override
  public CompletionStage<int[]> tokenize(SchedulingRequest request) {
    if (request.hasTokenIds()) {
      if (meters != null) {
        meters.callerSuccess.increment();
      }
      return CompletableFuture.completedFuture(request.tokens());
    }
    Local local = locals.get(request.model());
    if (local == null) {
      return remote(request);
    }
    long start = nanoClock.getAsLong();
    CompletableFuture<int[]> result = new CompletableFuture<>();
    CompletionStage<int[]> stage;
    try {
      stage = local.tokenizer().tokenize(request);
    } catch (RuntimeException e) {
      stage = CompletableFuture.failedFuture(e);
    }
    stage.whenComplete(
        (ids, err) -> {
          if (err == null && ids != null) {
            record(true, true, start);
            result.complete(ids);
            return;
          }
          record(true, false, start);
          Throwable cause = err != null ? err : new IllegalStateException("null token ids");
          if (!local.remoteFallback() || remote == null) {
            result.completeExceptionally(cause);
            return;
          }
          if (meters != null) {
            meters.fallbacks.increment();
          }
          remote(request)
              .whenComplete(
                  (rids, rerr) -> {
                    if (rerr != null) {
                      rerr.addSuppressed(cause);
                      result.completeExceptionally(rerr);
                    } else {
                      result.complete(rids);
                    }
                  });
        });
    return result;
  }

  private CompletionStage<int[]> remote(SchedulingRequest request) {
    if (remote == null) {
      return CompletableFuture.failedFuture(
          new Tokenizers.TokenizationException(
              "no local tokenizer for model \"" + request.model() + "\" and no remote fallback"));
    }
    long start = nanoClock.getAsLong();
    CompletionStage<int[]> stage;
    try {
      stage = remote.tokenize(request);
    } catch (RuntimeException e) {
      stage = CompletableFuture.failedFuture(e);
    }
    return stage.whenComplete((ids, err) -> record(false, err == null, start));
  }

  private void record(boolean local, boolean ok, long start) {
    if (meters == null) {
      return;
    }
    long nanos = nanoClock.getAsLong() - start;
    if (local) {
      (ok ? meters.localSuccess : meters.localFailure).increment();
      meters.localTime.record(nanos, TimeUnit.NANOSECONDS);
    } else {
      (ok ? meters.remoteSuccess : meters.remoteFailure).increment();
      meters.remoteTime.record(nanos, TimeUnit.NANOSECONDS);
    }
  }

  @Override
  public String toString() {
    return "TokenizerChain{local=" + locals.keySet() + ", remote=" + remote + "}";
  }

  private static final class Meters {
    final Counter callerSuccess;
    final Counter localSuccess;
    final Counter localFailure;
    final Counter remoteSuccess;
    final Counter remoteFailure;
    final Counter fallbacks;
    final Timer localTime;
    final Timer remoteTime;

    Meters(MeterRegistry r) {
      callerSuccess = requests(r, "caller", "success");
      localSuccess = requests(r, "local", "success");
      localFailure = requests(r, "local", "failure");
      remoteSuccess = requests(r, "remote", "success");
      remoteFailure = requests(r, "remote", "failure");
      fallbacks = Counter.builder("kvroute.tokenizer.fallbacks").register(r);
      localTime = timer(r, "local");
      remoteTime = timer(r, "remote");
    }

    private static Counter requests(MeterRegistry r, String source, String outcome) {
      return Counter.builder("kvroute.tokenizer.requests")
          .tag("source", source)
          .tag("outcome", outcome)
          .register(r);
    }

    private static Timer timer(MeterRegistry r, String source) {
      return Timer.builder("kvroute.tokenizer.duration")
          .tag("source", source)
          .publishPercentiles(0.5, 0.99)
          .register(r);
    }
  }

  /** Builds a {@link TokenizerChain}; not thread-safe. */
  public static final class Builder {
    private final Map<String, Local> locals = new LinkedHashMap<>();
    private Tokenizer remote;
    private io.micrometer.core.instrument.MeterRegistry registry;
    private LongSupplier nanoClock = System::nanoTime;

    private Builder() {}

    /** A local tokenizer for {@code model}, falling back to the remote one when it fails. */
    public Builder local(String model, Tokenizer tokenizer) {
      return local(model, tokenizer, true);
    }

    /**
     * A local tokenizer for {@code model}; {@code remoteFallback} false makes a local failure final
     * (the request is then scheduled without token ids).
     */
    public Builder local(String model, Tokenizer tokenizer, boolean remoteFallback) {
      if (model == null || model.isBlank()) {
        throw new IllegalArgumentException("tokenizer chain: model must be a non-blank name");
      }
      locals.put(model, new Local(Objects.requireNonNull(tokenizer, "tokenizer"), remoteFallback));
      return this;
    }

    /** The tokenizer for models without a local one, and for local failures (default: none). */
    public Builder remote(Tokenizer remote) {
      this.remote = remote;
      return this;
    }

    /** Where the {@code kvroute.tokenizer.*} meters go (default: none). */
    public Builder meterRegistry(MeterRegistry registry) {
      this.registry = registry;
      return this;
    }

    /** The clock of the duration timers (default {@link System#nanoTime}). */
    public Builder nanoClock(LongSupplier nanoClock) {
      this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
      return this;
    }

    /**
     * Builds the chain.
     *
     * @throws IllegalArgumentException when it has neither a local nor a remote tokenizer
     */
    public TokenizerChain build() {
      if (locals.isEmpty() && remote == null) {
        throw new IllegalArgumentException(
            "tokenizer chain needs at least one local tokenizer or a remote fallback");
      }
      return new TokenizerChain(this);
    }
  }
}
