package io.kvroute.scoring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class TokenizerChainTest {
  private final AtomicInteger remoteCalls = new AtomicInteger();
  private final Tokenizer remote =
      r -> {
        remoteCalls.incrementAndGet();
        return CompletableFuture.completedFuture(new int[] {9, 9});
      };
  private final Tokenizer localOk = r -> CompletableFuture.completedFuture(new int[] {1, 2, 3});
  private final Tokenizer localFails =
      r -> CompletableFuture.failedFuture(new IllegalStateException("no template"));

  private static SchedulingRequest request(String model) {
    return SchedulingRequest.builder().model(model).prompt("hello").build();
  }

  private static int[] join(java.util.concurrent.CompletionStage<int[]> s) {
    return s.toCompletableFuture().join();
  }

  @Test
  void aModelWithALocalTokenizerNeverCallsTheRemote() {
    SimpleMeterRegistry meters = new SimpleMeterRegistry();
    TokenizerChain chain =
        Tokenizers.chain().local("qwen", localOk).remote(remote).meterRegistry(meters).build();
    for (int i = 0; i < 5; i++) {
      assertThat(join(chain.tokenize(request("qwen")))).containsExactly(1, 2, 3);
    }
    assertThat(remoteCalls).hasValue(0);
    assertThat(
            meters
                .get("kvroute.tokenizer.requests")
                .tags("source", "local", "outcome", "success")
                .counter()
                .count())
        .isEqualTo(5);
    assertThat(meters.get("kvroute.tokenizer.duration").tags("source", "local").timer().count())
        .isEqualTo(5);
  }

  @Test
  void otherModelsGoRemote() {
    TokenizerChain chain = Tokenizers.chain().local("qwen", localOk).remote(remote).build();
    assertThat(join(chain.tokenize(request("llama")))).containsExactly(9, 9);
    assertThat(remoteCalls).hasValue(1);
    assertThat(chain.hasLocal("qwen")).isTrue();
    assertThat(chain.hasLocal("llama")).isFalse();
  }

  @Test
  void aLocalFailureFallsBackWhenAllowed() {
    SimpleMeterRegistry meters = new SimpleMeterRegistry();
    TokenizerChain chain =
        Tokenizers.chain().local("qwen", localFails).remote(remote).meterRegistry(meters).build();
    assertThat(join(chain.tokenize(request("qwen")))).containsExactly(9, 9);
    assertThat(meters.get("kvroute.tokenizer.fallbacks").counter().count()).isEqualTo(1);
    assertThat(
            meters
                .get("kvroute.tokenizer.requests")
                .tags("source", "local", "outcome", "failure")
                .counter()
                .count())
        .isEqualTo(1);
  }

  @Test
  void aLocalFailureIsFinalWhenFallbackIsOff() {
    TokenizerChain chain =
        Tokenizers.chain().local("qwen", localFails, false).remote(remote).build();
    assertThatThrownBy(() -> join(chain.tokenize(request("qwen"))))
        .isInstanceOf(CompletionException.class)
        .hasRootCauseMessage("no template");
    assertThat(remoteCalls).hasValue(0);
  }

  @Test
  void aThrowingLocalTokenizerIsAFailureNotAnException() {
    Tokenizer throwing =
        r -> {
          throw new IllegalStateException("boom");
        };
    TokenizerChain chain = Tokenizers.chain().local("qwen", throwing).remote(remote).build();
    assertThat(join(chain.tokenize(request("qwen")))).containsExactly(9, 9);
  }

  @Test
  void callerSuppliedIdsWin() {
    TokenizerChain chain = Tokenizers.chain().local("qwen", localFails).remote(remote).build();
    SchedulingRequest r = SchedulingRequest.builder().model("qwen").tokenIds(new int[] {7}).build();
    assertThat(join(chain.tokenize(r))).containsExactly(7);
    assertThat(remoteCalls).hasValue(0);
  }

  @Test
  void noLocalAndNoRemoteFailsTheStage() {
    TokenizerChain chain = Tokenizers.chain().local("qwen", localOk).build();
    assertThatThrownBy(() -> join(chain.tokenize(request("llama"))))
        .hasRootCauseInstanceOf(Tokenizers.TokenizationException.class);
    assertThatThrownBy(() -> Tokenizers.chain().build())
        .isInstanceOf(IllegalArgumentException.class);
  }
}
