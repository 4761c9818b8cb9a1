package io.kvroute.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.testkit.engine.CostModel;
import io.kvroute.testkit.engine.EngineProfile;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

/** The real-time simulator waits what the engine model's cost model says a lone request costs. */
class SimulatorCostModelTest {

  @Test
  void prefillAndDecodeSleepTheCostModelsSteps() {
    CostModel cost =
        CostModel.builder().overheadNanos(1_000).perTokenNanos(10).kvReadNanosPerToken(2).build();
    List<Long> sleeps = new CopyOnWriteArrayList<>();
    try (VllmSimulator sim =
        VllmSimulator.builder().costModel(cost).sleeper(sleeps::add).build().start()) {
      TestSupport.post(
          sim, "/v1/completions", TestSupport.completion(TestSupport.tokens(40, 1), 3));
      // prefill of 40 tokens, then two decode steps at contexts 41 and 42
      assertThat(sleeps)
          .containsExactly(
              cost.prefillNanos(40, 0, 8192),
              cost.decodeStepNanos(1, 41),
              cost.decodeStepNanos(1, 42));
      sleeps.clear();
      // the same prompt again: 32 tokens (two full blocks of 16) are cached
      TestSupport.post(
          sim, "/v1/completions", TestSupport.completion(TestSupport.tokens(40, 1), 1));
      assertThat(sleeps).containsExactly(cost.prefillNanos(40, 32, 8192));
    }
  }

  @Test
  void anEngineProfileSetsTheCacheGeometry() {
    try (VllmSimulator sim =
        VllmSimulator.builder()
            .engineProfile(EngineProfile.LLAMA_70B_FP8_2XH100)
            .sleeper(Sleeper.NONE)
            .build()
            .start()) {
      assertThat(sim.metricsText()).contains("num_gpu_blocks=\"13200\"");
    }
  }
}
