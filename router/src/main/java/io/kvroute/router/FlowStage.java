package io.kvroute.router;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.connector.CancellableFutures;
import io.kvroute.connector.ConnectorException.InvalidRequestException;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.http.OpenAiJson;
import io.kvroute.router.flow.FlowControlConfig;
import io.kvroute.router.flow.FlowController;
import io.kvroute.router.flow.RequestDroppedException;
import io.kvroute.router.flow.SloGate;
import io.kvroute.scoring.LatencySlo;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;
import java.util.function.LongSupplier;
import java.util.function.Predicate;

/**
 * The admission stage in front of {@link KvRouter}'s decision: reads a request's model, priority,
 * tenant, token estimate and objective, waits for {@link FlowController} to admit it, schedules it,
 * and applies the latency rule ({@link SloGate}): a request that no endpoint is predicted to serve
 * within its objective yet waits again; one that none can serve in time any more is dropped ({@code
 * slo-unattainable}). The admission rides on the {@link RouteDecision} and is released when the
 * request ends.
 *
 * <p>Thread-safe; each request's state lives in its own futures.
 */
final class FlowStage {
  /** Characters per token of the estimate of a prompt not yet tokenized (llm-d's). */
  static final int CHARS_PER_TOKEN = 4;

  /** The longest tenant name taken from a header; longer ones are hashed. */
  static final int MAX_TENANT_LENGTH = 128;

  /** Output tokens counted for {@code max_tokens} at most. */
  static final long MAX_OUTPUT_ESTIMATE = 32_768;

  private final KvRouter router;
  private final FlowController controller;
  private final FlowControlConfig config;
  private final LongSupplier clock;

  FlowStage(KvRouter router, FlowController controller, LongSupplier clock) {
    this.router = router;
    this.controller = controller;
    this.config = controller.config();
    this.clock = clock;
  }

  FlowController controller() {
    return controller;
  }

  /** The latency objective of {@code model}'s requests that carry none. */
  LatencySlo defaultSlo(String model) {
    return config.objective(model).map(FlowControlConfig.Objective::slo).orElse(LatencySlo.NONE);
  }

  /** What flow control needs to know about {@code request}. */
  FlowController.FlowRequest classify(InferenceRequest request) {
    JsonNode body = OpenAiJson.clientBody(request);
    JsonNode m = body.get("model");
    if (m == null || !m.isTextual() || m.asText().isBlank()) {
      throw new InvalidRequestException("request body field \"model\" must be a non-empty string");
    }
    String model = m.asText();
    Optional<FlowControlConfig.Objective> objective = config.objective(model);
    int priority = priority(request::header, objective);
    LatencySlo slo;
    try {
      slo = LatencySlo.fromHeaders(request::header);
    } catch (IllegalArgumentException e) {
      throw new InvalidRequestException(e.getMessage());
    }
    slo = slo.orElse(defaultSlo(model));
    long tokens = request.bodyLength() / CHARS_PER_TOKEN + maxTokens(body);
    return new FlowController.FlowRequest(model, priority, tenant(request::header), tokens, slo);
  }

  private int priority(
      Function<String, Optional<String>> header, Optional<FlowControlConfig.Objective> objective) {
    Optional<String> h = header.apply(FlowControlConfig.PRIORITY_HEADER);
    if (h.isPresent()) {
      try {
        return Integer.parseInt(h.get().trim());
      } catch (NumberFormatException e) {
        throw new InvalidRequestException(
            "header "
                + FlowControlConfig.PRIORITY_HEADER
                + " must be an integer, was \""
                + h.get()
                + "\"");
      }
    }
    return objective
        .map(FlowControlConfig.Objective::priority)
        .filter(p -> p != null)
        .orElse(config.defaultPriority());
  }

  private static long maxTokens(JsonNode body) {
    for (String f : new String[] {"max_tokens", "max_completion_tokens"}) {
      JsonNode v = body.get(f);
      if (v != null && v.canConvertToLong() && v.asLong() > 0) {
        return Math.min(MAX_OUTPUT_ESTIMATE, v.asLong());
      }
    }
    return 0;
  }

  /**
   * The tenant: the configured header's value, else (when enabled) a hash of the API key, else
   * {@link FlowControlConfig#DEFAULT_TENANT}.
   */
  String tenant(Function<String, Optional<String>> header) {
    if (config.tenantHeader().isPresent()) {
      Optional<String> t = header.apply(config.tenantHeader().get());
      if (t.isPresent() && !t.get().isBlank()) {
        String v = t.get().trim();
        return v.length() <= MAX_TENANT_LENGTH ? v : "h-" + hash(v);
      }
    }
    if (config.tenantFromApiKey()) {
      Optional<String> auth = header.apply("authorization");
      if (auth.isPresent()) {
        String a = auth.get().trim();
        if (a.regionMatches(true, 0, "bearer ", 0, 7)) {
          a = a.substring(7).trim();
        }
        if (!a.isEmpty()) {
          return "key-" + hash(a);
        }
      }
    }
    return FlowControlConfig.DEFAULT_TENANT;
  }

  /** The first 8 bytes of SHA-256, hex: the key itself is never kept or shown. */
  static String hash(String secret) {
    try {
      byte[] d =
          MessageDigest.getInstance("SHA-256").digest(secret.getBytes(StandardCharsets.UTF_8));
      return HexFormat.of().formatHex(d, 0, 8);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is missing", e);
    }
  }

  /**
   * Admission of a pass-through request ({@link KvRouter#decidePassThrough}: an API kvroute does
   * not schedule): by its priority and tenant headers, its model's objective and its body's length,
   * at once or refused with {@code queue-full} (the decision is synchronous: it cannot wait). No
   * latency rule: there is no prompt to predict a first token for.
   *
   * @param model the model the body names, or {@link KvRouter#PASS_THROUGH_MODEL}
   * @param header the client's headers, case-insensitively
   */
  FlowController.Admission admitPassThrough(
      String model, Function<String, Optional<String>> header, long bodyLength) {
    int priority = priority(header, config.objective(model));
    FlowController.FlowRequest fr =
        new FlowController.FlowRequest(
            model, priority, tenant(header), bodyLength / CHARS_PER_TOKEN, LatencySlo.NONE);
    return controller.tryAdmit(fr).orElseThrow(() -> cannotWait());
  }

  private RequestDroppedException cannotWait() {
    return new RequestDroppedException(
        RequestDroppedException.Reason.QUEUE_FULL,
        "request dropped by flow control (queue-full): the fleet is saturated and"
            + " a synchronous decision cannot wait",
        config.retryAfter());
  }

  /** The synchronous way in ({@link KvRouter#decide}): admitted at once, or refused. */
  RouteDecision decideNow(InferenceRequest request) {
    FlowController.FlowRequest fr = classify(request);
    FlowController.Admission a = controller.tryAdmit(fr).orElseThrow(() -> cannotWait());
    RouteDecision rd;
    try {
      rd = router.decideScheduled(request);
    } catch (RuntimeException e) {
      a.release();
      throw e;
    }
    SloGate.Verdict v =
        SloGate.check(
            rd.scheduling(),
            router.scheduler().latencyPredictor(),
            fr.slo(),
            clock.getAsLong() - a.arrivalNanos());
    if (v != SloGate.Verdict.SEND) {
      router.discard(rd);
      throw a.drop(
          v == SloGate.Verdict.UNATTAINABLE
              ? RequestDroppedException.Reason.SLO_UNATTAINABLE
              : RequestDroppedException.Reason.QUEUE_FULL,
          "no endpoint is predicted to meet the request's ttft objective now");
    }
    rd.admitted(a);
    return rd;
  }

  /** The asynchronous way in: waits for admission, schedules, applies the latency rule. */
  CompletableFuture<RouteDecision> decide(
      InferenceRequest request, Predicate<Endpoint> candidateFilter) {
    FlowController.FlowRequest fr;
    try {
      fr = classify(request);
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(e);
    }
    CompletableFuture<FlowController.Admission> admitted = controller.enqueue(fr);
    FlowController.Admission a = null;
    CompletableFuture<RouteDecision> scheduled = null;
    if (admitted.isDone() && !admitted.isCompletedExceptionally()) {
      // admitted at once (the fleet has room): when scheduling answers at once too, the decision
      // needs no future of flow control's own (what flow control costs an idle gateway)
      a = admitted.join();
      scheduled = router.decideScheduledAsync(request, candidateFilter);
      if (scheduled.isDone() && !scheduled.isCompletedExceptionally()) {
        RouteDecision rd = scheduled.join();
        if (verdict(rd, a, fr) == SloGate.Verdict.SEND) {
          rd.admitted(a);
          return CompletableFuture.completedFuture(rd);
        }
      }
    }
    CompletableFuture<RouteDecision> result = new CompletableFuture<>();
    AtomicReference<CompletableFuture<?>> current = new AtomicReference<>();
    result.whenComplete(
        (rd, t) -> {
          if (result.isCancelled()) {
            CompletableFuture<?> c = current.get();
            if (c != null) {
              c.cancel(true);
            }
          }
        });
    if (scheduled != null) {
      whenScheduled(a, scheduled, request, candidateFilter, fr, result, current);
    } else {
      await(admitted, request, candidateFilter, fr, result, current);
    }
    return result;
  }

  private SloGate.Verdict verdict(
      RouteDecision rd, FlowController.Admission a, FlowController.FlowRequest fr) {
    return SloGate.check(
        rd.scheduling(),
        router.scheduler().latencyPredictor(),
        fr.slo(),
        clock.getAsLong() - a.arrivalNanos());
  }

  private void await(
      CompletableFuture<FlowController.Admission> admitted,
      InferenceRequest request,
      Predicate<Endpoint> candidateFilter,
      FlowController.FlowRequest fr,
      CompletableFuture<RouteDecision> result,
      AtomicReference<CompletableFuture<?>> current) {
    current.set(admitted);
    if (result.isCancelled()) {
      admitted.cancel(true);
    }
    admitted.whenComplete(
        (a, t) -> {
          if (t != null) {
            result.completeExceptionally(CancellableFutures.unwrap(t));
            return;
          }
          whenScheduled(
              a,
              router.decideScheduledAsync(request, candidateFilter),
              request,
              candidateFilter,
              fr,
              result,
              current);
        });
  }

  /** Applies the latency rule to an admitted request's decision once {@code scheduled} is done. */
  private void whenScheduled(
      FlowController.Admission a,
      CompletableFuture<RouteDecision> scheduled,
      InferenceRequest request,
      Predicate<Endpoint> candidateFilter,
      FlowController.FlowRequest fr,
      CompletableFuture<RouteDecision> result,
      AtomicReference<CompletableFuture<?>> current) {
    current.set(scheduled);
    scheduled.whenComplete(
        (rd, t2) -> {
          if (t2 != null) {
            a.release();
            result.completeExceptionally(CancellableFutures.unwrap(t2));
            return;
          }
          SloGate.Verdict v = verdict(rd, a, fr);
          if (v == SloGate.Verdict.SEND) {
            rd.admitted(a);
            if (!result.complete(rd)) {
              router.discard(rd); // cancelled meanwhile
              a.release();
            }
            return;
          }
          router.discard(rd);
          if (v == SloGate.Verdict.UNATTAINABLE || result.isDone()) {
            result.completeExceptionally(
                a.drop(
                    RequestDroppedException.Reason.SLO_UNATTAINABLE,
                    "no endpoint can meet its ttft objective of "
                        + fr.slo().ttftNanos() / 1_000_000
                        + " ms any more"));
            return;
          }
          await(a.requeue(), request, candidateFilter, fr, result, current);
        });
  }
}
