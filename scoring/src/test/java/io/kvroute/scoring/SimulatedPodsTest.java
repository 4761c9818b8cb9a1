package io.kvroute.scoring;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.connector.Endpoint;
import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.scoring.internal.Hashing;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * End to end over the real kvindex {@link BlockIndex}: simulated engines publish {@code
 * BlockStored} for every prompt they serve (what vLLM's KV events carry), and the scheduler routes
 * conversations and cold prompts.
 */
class SimulatedPodsTest {
  private static final int BLOCK = 16;

  /** A pod that "caches" every full block of the prompts it serves and reports them. */
  private static final class SimPod {
    final Endpoint endpoint;
    final BlockIndex index;
    int served;

    SimPod(String id, BlockIndex index) {
      this.endpoint = TestSupport.ep(id);
      this.index = index;
    }

    void serve(int[] prompt) {
      served++;
      int full = prompt.length / BLOCK;
      int[] tokens = Arrays.copyOf(prompt, full * BLOCK);
      // Engine hashes: a chain of our own (the index maps them to its request keys).
      long[] engine = Hashing.chainedBlocks(tokens, BLOCK, 0, "engine", endpoint.id());
      index.blockStored(endpoint.id(), engine, false, 0, tokens, BLOCK, null, "GPU", 0);
    }
  }

  private final BlockIndex index =
      BlockIndex.inMemory(IndexConfig.builder().blockSize(BLOCK).modelName("m").build());
  private final List<SimPod> pods = new ArrayList<>();
  private final Map<String, SimPod> byId = new HashMap<>();
  private final Scheduler scheduler;

  SimulatedPodsTest() {
    for (int i = 0; i < 4; i++) {
      SimPod p = new SimPod("pod-" + i, index);
      pods.add(p);
      byId.put(p.endpoint.id(), p);
    }
    scheduler =
        Scheduler.builder()
            .prefixCacheLookup(BlockIndexLookup.of(index))
            .random(new Random(5))
            .build();
  }

  private List<Endpoint> candidates() {
    return pods.stream().map(p -> p.endpoint).toList();
  }

  private Decision pick(int[] prompt) {
    return scheduler.pick(
        SchedulingRequest.builder().model("m").tokenIds(prompt).candidates(candidates()).build());
  }

  private String route(int[] prompt) {
    Decision d = pick(prompt);
    assertThat(d.routed()).isTrue();
    scheduler.onRouted(d);
    SimPod pod = byId.get(d.primary().get().id());
    pod.serve(prompt); // the engine's KV events reach the index
    scheduler.onComplete(d);
    return pod.endpoint.id();
  }

  @Test
  void repeatsOfAConversationGoToThePodHoldingItsPrefix() {
    Random r = new Random(42);
    int conversations = 8;
    int[][] history = new int[conversations][];
    String[] home = new String[conversations];
    for (int c = 0; c < conversations; c++) {
      history[c] = TestSupport.tokens(512, 1000 + c); // a distinct system prompt each
    }
    for (int turn = 0; turn < 5; turn++) {
      for (int c = 0; c < conversations; c++) {
        int[] next = Arrays.copyOf(history[c], history[c].length + 40 + r.nextInt(40));
        for (int i = history[c].length; i < next.length; i++) {
          next[i] = r.nextInt(150_000);
        }
        history[c] = next;
        String pod = route(next);
        if (turn == 0) {
          home[c] = pod;
        } else {
          assertThat(pod).as("conversation %d turn %d", c, turn).isEqualTo(home[c]);
        }
      }
    }
    // The first turns were cold: the no-hit scorer spread them evenly.
    Map<String, Integer> homes = new HashMap<>();
    for (String h : home) {
      homes.merge(h, 1, Integer::sum);
    }
    assertThat(homes.values()).containsOnly(2);
  }

  @Test
  void coldPromptsAreSpreadAcrossPods() {
    for (int i = 0; i < 40; i++) {
      route(TestSupport.tokens(256, 5000 + i));
    }
    assertThat(pods).allSatisfy(p -> assertThat(p.served).isEqualTo(10));
  }

  @Test
  void tierWeightingPrefersGpuOverCpuCopies() {
    int[] prompt = TestSupport.tokens(640, 77);
    int[] tokens = Arrays.copyOf(prompt, 640);
    long[] e0 = Hashing.chainedBlocks(tokens, BLOCK, 0, "engine", "pod-0");
    long[] e1 = Hashing.chainedBlocks(tokens, BLOCK, 0, "engine", "pod-1");
    index.blockStored("pod-0", e0, false, 0, tokens, BLOCK, null, "CPU", 0);
    index.blockStored("pod-1", e1, false, 0, tokens, BLOCK, null, "GPU", 0);
    Decision d = pick(prompt);
    assertThat(d.primary().get().id()).isEqualTo("pod-1");
    assertThat(d.scores().get("pod-0").get("precise-prefix-cache-scorer")).isEqualTo(0.8);
    assertThat(d.scores().get("pod-1").get("precise-prefix-cache-scorer")).isEqualTo(1.0);
  }
}
