package io.kvroute.scoring.internal;

import io.kvroute.scoring.EndpointMetrics;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;

/**
 * Maps a vLLM or SGLang {@code /metrics} page to {@link EndpointMetrics}. Series of one metric
 * (several models, engines or DP ranks behind one endpoint) are summed for counts; the usage is the
 * maximum. For {@code vllm:lora_requests_info} the newest series (largest value, a timestamp) wins.
 *
 * <p>Stateless and thread-safe.
 */
public final class EngineMetricsParser {
  private EngineMetricsParser() {}

  /** Parsed page; {@code null} when the page has none of the known metrics. */
  public static EndpointMetrics parse(CharSequence page) {
    Acc a = new Acc();
    PrometheusText.parse(page, EngineMetricsParser::wanted, a);
    if (!a.any) {
      return null;
    }
    double usage = !Double.isNaN(a.kvUsage) ? a.kvUsage : a.gpuUsage;
    return new EndpointMetrics(
        a.waiting,
        a.running,
        usage,
        a.runningLoras,
        a.waitingLoras,
        a.maxLora,
        a.blockSize,
        a.numBlocks);
  }

  static boolean wanted(String name) {
    return name.startsWith("vllm:") || name.startsWith("sglang:");
  }

  private static final class Acc implements PrometheusText.SampleConsumer {
    boolean any;
    int waiting = -1;
    int running = -1;
    double kvUsage = Double.NaN;
    double gpuUsage = Double.NaN;
    double loraTs = Double.NEGATIVE_INFINITY;
    Set<String> runningLoras = Set.of();
    Set<String> waitingLoras = Set.of();
    int maxLora = -1;
    int blockSize = -1;
    long numBlocks = -1;

    @Override
    public void accept(String name, Map<String, String> labels, double v) {
      switch (name) {
        case "vllm:num_requests_waiting", "sglang:num_queue_reqs" -> waiting = add(waiting, v);
        case "vllm:num_requests_running", "sglang:num_running_reqs" -> running = add(running, v);
        case "vllm:kv_cache_usage_perc", "sglang:token_usage" -> kvUsage = max(kvUsage, v);
        case "vllm:gpu_cache_usage_perc" -> gpuUsage = max(gpuUsage, v);
        case "vllm:lora_requests_info" -> {
          if (v >= loraTs) {
            loraTs = v;
            runningLoras = split(labels.get("running_lora_adapters"));
            waitingLoras = split(labels.get("waiting_lora_adapters"));
            maxLora = parseInt(labels.get("max_lora"), -1);
          }
        }
        case "vllm:cache_config_info" -> {
          blockSize = parseInt(labels.get("block_size"), blockSize);
          numBlocks = parseInt(labels.get("num_gpu_blocks"), (int) numBlocks);
        }
        case "sglang:cache_config_info" -> {
          blockSize = parseInt(labels.get("page_size"), blockSize);
          numBlocks = parseInt(labels.get("num_pages"), (int) numBlocks);
        }
        default -> {
          return;
        }
      }
      any = true;
    }

    private static int add(int acc, double v) {
      if (!Double.isFinite(v) || v < 0) {
        return acc;
      }
      return (int) Math.min(Integer.MAX_VALUE, Math.max(acc, 0) + Math.round(v));
    }

    private static double max(double acc, double v) {
      if (Double.isNaN(v)) {
        return acc;
      }
      return Double.isNaN(acc) ? v : Math.max(acc, v);
    }

    private static Set<String> split(String s) {
      if (s == null || s.isBlank()) {
        return Set.of();
      }
      Set<String> out = new LinkedHashSet<>();
      for (String p : s.split(",")) {
        if (!p.isBlank()) {
          out.add(p.trim());
        }
      }
      return out;
    }

    private static int parseInt(String s, int dflt) {
      if (s == null) {
        return dflt;
      }
      try {
        return (int) Double.parseDouble(s.trim());
      } catch (NumberFormatException e) {
        return dflt;
      }
    }
  }
}
