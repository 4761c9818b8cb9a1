package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import io.kvroute.scoring.internal.Hashing;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/** Shared helpers for the scoring tests. */
final class TestSupport {
  private TestSupport() {}

  /**
   * The start of an llm-d {@code EndpointPickerConfig} whose plugins begin with the PD role
   * filters; a test appends its other plugins and its profiles.
   */
  static final String PD_FILTERS_CONFIG =
      """
      apiVersion: llm-d.ai/v1alpha1
      kind: EndpointPickerConfig
      plugins:
      - type: decode-filter
      - type: prefill-filter
      """;

  static Endpoint ep(String id) {
    return Endpoint.builder(id, "10.0.0." + (Math.abs(id.hashCode()) % 250 + 1), 8000).build();
  }

  static Endpoint ep(String id, Endpoint.Role role, Map<String, String> labels) {
    return Endpoint.builder(id, "10.0.0." + (Math.abs(id.hashCode()) % 250 + 1), 8000)
        .role(role)
        .labels(labels)
        .build();
  }

  /**
   * PD endpoints labelled with their {@code group}, each given as {@code id@group}: ids starting
   * with "p" are prefill endpoints, the others decode ones.
   */
  static List<Endpoint> grouped(String... idAtGroup) {
    List<Endpoint> out = new ArrayList<>();
    for (String s : idAtGroup) {
      int at = s.indexOf('@');
      String id = s.substring(0, at);
      Endpoint.Role role = id.startsWith("p") ? Endpoint.Role.PREFILL : Endpoint.Role.DECODE;
      out.add(ep(id, role, Map.of("group", s.substring(at + 1))));
    }
    return List.copyOf(out);
  }

  static List<Endpoint> eps(String... ids) {
    List<Endpoint> out = new ArrayList<>();
    for (String id : ids) {
      out.add(ep(id));
    }
    return out;
  }

  static int[] tokens(int n, int seed) {
    int[] t = new int[n];
    Random r = new Random(seed);
    for (int i = 0; i < n; i++) {
      t[i] = r.nextInt(150_000);
    }
    return t;
  }

  /** A manual clock. */
  static final class Clock {
    final AtomicLong now = new AtomicLong(1_000_000_000L);

    long get() {
      return now.get();
    }

    void advanceMillis(long ms) {
      now.addAndGet(ms * 1_000_000L);
    }
  }

  /** A simple in-memory precise index: key → (endpoint → tier weight). */
  static final class FakeLookup implements PrefixCacheLookup {
    final int blockSize;
    final Map<Long, Map<String, Double>> blocks = new ConcurrentHashMap<>();

    FakeLookup(int blockSize) {
      this.blockSize = blockSize;
    }

    @Override
    public int blockSizeTokens() {
      return blockSize;
    }

    @Override
    public long[] requestKeys(int[] tokens, String lora, String cacheSalt) {
      int full = tokens.length / blockSize;
      int[] t = java.util.Arrays.copyOf(tokens, full * blockSize);
      return Hashing.chainedBlocks(t, blockSize, 0, lora == null ? "m" : lora, cacheSalt);
    }

    /** Marks the first {@code blocks} blocks of {@code tokens} as held by the endpoint. */
    void store(String endpoint, int[] tokens, String lora, int blocks, double weight) {
      long[] keys = requestKeys(tokens, "m".equals(lora) ? null : lora, null);
      for (int i = 0; i < Math.min(blocks, keys.length); i++) {
        blocks_(keys[i]).put(endpoint, weight);
      }
    }

    private Map<String, Double> blocks_(long k) {
      return blocks.computeIfAbsent(k, x -> new ConcurrentHashMap<>());
    }

    @Override
    public void lookup(long[] keys, List<Endpoint> candidates, int[] matched, double[] weighted) {
      Set<Integer> active = new HashSet<>();
      Map<String, Integer> idx = new HashMap<>();
      for (int i = 0; i < candidates.size(); i++) {
        active.add(i);
        idx.put(candidates.get(i).id(), i);
      }
      for (long k : keys) {
        Map<String, Double> holders = blocks.getOrDefault(k, Map.of());
        Set<Integer> next = new HashSet<>();
        for (int c : active) {
          Double w = holders.get(candidates.get(c).id());
          if (w != null) {
            matched[c]++;
            weighted[c] += w;
            next.add(c);
          }
        }
        active = next;
        if (active.isEmpty()) {
          return;
        }
      }
    }
  }
}
