package io.kvroute.router;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.connector.AllAttemptsFailedException;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.Leg;
import io.kvroute.connector.UpstreamException;
import io.kvroute.router.flow.RequestDroppedException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.Test;

/** The failure table, row by row, from the exceptions kvroute raises. */
class FailureAnswerTest {

  private static UpstreamException status(int status, Duration retryAfter, String body) {
    return new UpstreamException(
        Leg.DECODE,
        "d",
        UpstreamException.Kind.STATUS,
        status,
        retryAfter,
        body,
        "decode answered " + status,
        null);
  }

  private static UpstreamException kind(UpstreamException.Kind kind) {
    return new UpstreamException(Leg.PREFILL, "p", kind, 0, null, null, kind.name(), null);
  }

  private static FailureAnswer answer(Throwable t) {
    return FailureAnswer.of(t).orElseThrow();
  }

  private static String body(FailureAnswer a) {
    return new String(a.body(), StandardCharsets.UTF_8);
  }

  @Test
  void clientMistakesAreTheirOwnStatus() {
    FailureAnswer a = answer(new ConnectorException.InvalidRequestException("bad \"json\""));
    assertThat(a.status()).isEqualTo(400);
    assertThat(a.type()).isEqualTo(FailureAnswer.INVALID_REQUEST);
    assertThat(body(a))
        .isEqualTo(
            "{\"error\":{\"message\":\"bad \\\"json\\\"\",\"type\":\"invalid_request_error\","
                + "\"param\":null,\"code\":400}}");
    assertThat(a.headers()).containsExactly(Map.entry("Content-Type", "application/json"));
    assertThat(answer(new ConnectorException.InvalidRequestException("big", 413)).status())
        .isEqualTo(413);
  }

  @Test
  void anEngineThatIsOverloadedIs503WithRetryAfter() {
    FailureAnswer a = answer(status(429, Duration.ofSeconds(7), "busy"));
    assertThat(a.status()).isEqualTo(503);
    assertThat(a.type()).isEqualTo(FailureAnswer.UPSTREAM_UNAVAILABLE);
    assertThat(a.headers()).containsEntry("Retry-After", "7");
    assertThat(answer(status(503, null, null)).headers()).containsEntry("Retry-After", "1");
    assertThat(answer(status(429, Duration.ofMillis(1500), null)).headers())
        .containsEntry("Retry-After", "2");
  }

  @Test
  void anEnginesOwnRefusalIsRelayed() {
    String engine = "{\"object\":\"error\",\"message\":\"too long\"}";
    FailureAnswer a = answer(status(400, null, engine));
    assertThat(a.status()).isEqualTo(400);
    assertThat(a.relaysEngineBody()).isTrue();
    assertThat(body(a)).isEqualTo(engine);
    FailureAnswer text = answer(status(404, null, "not found"));
    assertThat(text.relaysEngineBody()).isFalse();
    assertThat(body(text)).contains("\"type\":\"invalid_request_error\"").contains("\"code\":404");
  }

  @Test
  void engineFailuresAre502And504() {
    assertThat(answer(status(500, null, "x")).status()).isEqualTo(502);
    assertThat(answer(status(502, null, "x")).type()).isEqualTo(FailureAnswer.UPSTREAM_ERROR);
    assertThat(answer(kind(UpstreamException.Kind.IO)).status()).isEqualTo(502);
    assertThat(answer(kind(UpstreamException.Kind.PROTOCOL)).status()).isEqualTo(502);
    FailureAnswer slow = answer(kind(UpstreamException.Kind.TIMEOUT));
    assertThat(slow.status()).isEqualTo(504);
    assertThat(slow.type()).isEqualTo(FailureAnswer.UPSTREAM_TIMEOUT);
  }

  @Test
  void aRequestDroppedByFlowControlIs429NamingTheReason() {
    for (RequestDroppedException.Reason r : RequestDroppedException.Reason.values()) {
      FailureAnswer a =
          answer(
              new CompletionException(
                  new RequestDroppedException(r, "dropped: " + r.header(), Duration.ofSeconds(2))));
      assertThat(a.status()).isEqualTo(429);
      assertThat(a.type()).isEqualTo(FailureAnswer.DROPPED);
      assertThat(a.droppedReason()).contains(r.header());
      assertThat(a.headers())
          .containsExactly(
              Map.entry("Content-Type", "application/json"),
              Map.entry("Retry-After", "2"),
              Map.entry(RequestDroppedException.HEADER, r.header()));
      assertThat(body(a)).contains("\"code\":429").contains("dropped: " + r.header());
    }
    assertThat(RequestDroppedException.Reason.QUEUE_FULL.header()).isEqualTo("queue-full");
    assertThat(RequestDroppedException.Reason.TTL_EXPIRED.header()).isEqualTo("ttl-expired");
    assertThat(RequestDroppedException.Reason.SHED_LOWER_PRIORITY.header())
        .isEqualTo("shed-lower-priority");
    assertThat(answer(new ConnectorException.InvalidRequestException("x")).droppedReason())
        .isEmpty();
  }

  @Test
  void noEndpointIs503AndASaturatedFleet429() {
    FailureAnswer none = answer(new ConnectorException.NoAvailableEndpointException("none"));
    assertThat(none.status()).isEqualTo(503);
    assertThat(none.type()).isEqualTo(FailureAnswer.NO_ENDPOINT);
    assertThat(none.retryAfter()).isEmpty();
    FailureAnswer busy = answer(new ConnectorException.NoAvailableEndpointException("busy", true));
    assertThat(busy.status()).isEqualTo(429);
    assertThat(busy.type()).isEqualTo(FailureAnswer.SATURATED);
    assertThat(busy.headers()).containsEntry("Retry-After", "1");
  }

  @Test
  void everyAttemptFailedIsAnsweredAsTheLastWithEveryAttemptInTheMessage() {
    AllAttemptsFailedException all =
        new AllAttemptsFailedException(
            "all 2 attempts failed",
            List.of(
                new AllAttemptsFailedException.Attempt(1, null, "d0", status(500, null, null)),
                new AllAttemptsFailedException.Attempt(
                    2, null, "d1", status(429, Duration.ofSeconds(3), null))));
    FailureAnswer a = answer(new CompletionException(all));
    assertThat(a.status()).isEqualTo(503);
    assertThat(a.headers()).containsEntry("Retry-After", "3");
    assertThat(a.message()).contains("attempt 1").contains("attempt 2");
  }

  @Test
  void aGoneClientGetsNoAnswer() {
    assertThat(FailureAnswer.of(new CancellationException())).isEmpty();
    assertThat(FailureAnswer.of(new CompletionException(kind(UpstreamException.Kind.CANCELLED))))
        .isEmpty();
  }

  @Test
  void otherFailures() {
    assertThat(answer(new ConnectorException.ForbiddenTargetException("no")).status())
        .isEqualTo(403);
    FailureAnswer config = answer(new ConnectorException("broken", 500, null));
    assertThat(config.type()).isEqualTo(FailureAnswer.ROUTING_ERROR);
    assertThat(answer(new ConnectorException("odd", 42, null)).status()).isEqualTo(500);
    FailureAnswer bug = answer(new IllegalStateException("boom"));
    assertThat(bug.status()).isEqualTo(500);
    assertThat(bug.type()).isEqualTo(FailureAnswer.INTERNAL_ERROR);
  }

  @Test
  void aStreamCutAfterItsFirstByteEndsWithAnSseErrorEvent() {
    String event =
        new String(
            FailureAnswer.sseEvent(new CompletionException(kind(UpstreamException.Kind.IO))),
            StandardCharsets.UTF_8);
    assertThat(event)
        .isEqualTo(
            "data: {\"error\":{\"message\":\"upstream stream failed: IO\","
                + "\"type\":\"upstream_error\",\"param\":null,\"code\":502}}\n\n");
  }
}
