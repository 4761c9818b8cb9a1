package io.kvroute.scoring.internal;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.scoring.EndpointMetrics;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class PrometheusTextTest {
  record Sample(String name, Map<String, String> labels, double value) {}

  private static List<Sample> parse(String text) {
    List<Sample> out = new ArrayList<>();
    PrometheusText.parse(text, n -> true, (n, l, v) -> out.add(new Sample(n, l, v)));
    return out;
  }

  @Test
  void parsesNamesLabelsValuesAndTimestamps() {
    String text =
        "# HELP vllm:num_requests_waiting Number of requests waiting.\n"
            + "# TYPE vllm:num_requests_waiting gauge\n"
            + "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 3.0\n"
            + "plain 42 1700000000000\r\n"
            + "\n"
            + "esc{a=\"x\\\"y\\\\z\\n\", b=\"\"} -1.5e2\n"
            + "trailing_comma{a=\"1\",} +Inf\n"
            + "nan NaN\n";
    List<Sample> s = parse(text);
    assertThat(s).hasSize(5);
    assertThat(s.get(0).labels()).containsEntry("engine", "0").containsEntry("model_name", "m");
    assertThat(s.get(0).value()).isEqualTo(3.0);
    assertThat(s.get(1)).isEqualTo(new Sample("plain", Map.of(), 42));
    assertThat(s.get(2).labels()).containsEntry("a", "x\"y\\z\n").containsEntry("b", "");
    assertThat(s.get(2).value()).isEqualTo(-150);
    assertThat(s.get(3).value()).isInfinite();
    assertThat(s.get(4).value()).isNaN();
  }

  @Test
  void malformedLinesAreSkippedAndCounted() {
    String text =
        "ok 1\n"
            + "{novalue=\"x\"} 1\n"
            + "unterminated{a=\"x} 1\n"
            + "nolabelvalue{a=} 1\n"
            + "novalue\n"
            + "notanumber abc\n"
            + "ok2 2\n";
    List<Sample> out = new ArrayList<>();
    int bad = PrometheusText.parse(text, n -> true, (n, l, v) -> out.add(new Sample(n, l, v)));
    assertThat(out).extracting(Sample::name).containsExactly("ok", "ok2");
    assertThat(bad).isEqualTo(5);
  }

  @Test
  void vllmPageMapsToEndpointMetrics() {
    String page =
        "vllm:num_requests_waiting{model_name=\"m\",engine=\"0\"} 2.0\n"
            + "vllm:num_requests_waiting{model_name=\"m\",engine=\"1\"} 3.0\n"
            + "vllm:num_requests_running{model_name=\"m\"} 7.0\n"
            + "vllm:kv_cache_usage_perc{model_name=\"m\"} 0.42\n"
            + "vllm:lora_requests_info{max_lora=\"4\",running_lora_adapters=\"old\","
            + "waiting_lora_adapters=\"\"} 1.0e9\n"
            + "vllm:lora_requests_info{max_lora=\"4\",running_lora_adapters=\"a,b\","
            + "waiting_lora_adapters=\"c\"} 1.7e9\n"
            + "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"8192\"} 1.0\n";
    EndpointMetrics m = EngineMetricsParser.parse(page);
    assertThat(m.waitingRequests()).isEqualTo(5);
    assertThat(m.runningRequests()).isEqualTo(7);
    assertThat(m.kvCacheUsage()).isEqualTo(0.42);
    assertThat(m.runningLoras()).containsExactlyInAnyOrder("a", "b");
    assertThat(m.waitingLoras()).containsExactly("c");
    assertThat(m.maxLoras()).isEqualTo(4);
    assertThat(m.blockSize()).isEqualTo(16);
    assertThat(m.numGpuBlocks()).isEqualTo(8192);
  }

  @Test
  void legacyGpuUsageAndSglang() {
    EndpointMetrics legacy =
        EngineMetricsParser.parse("vllm:gpu_cache_usage_perc 0.3\nvllm:num_requests_waiting 1\n");
    assertThat(legacy.kvCacheUsage()).isEqualTo(0.3);
    EndpointMetrics sg =
        EngineMetricsParser.parse(
            "sglang:num_queue_reqs{tp_rank=\"0\"} 4\n"
                + "sglang:num_running_reqs 2\n"
                + "sglang:token_usage 0.9\n"
                + "sglang:cache_config_info{page_size=\"64\",num_pages=\"100\"} 1\n");
    assertThat(sg.waitingRequests()).isEqualTo(4);
    assertThat(sg.runningRequests()).isEqualTo(2);
    assertThat(sg.kvCacheUsage()).isEqualTo(0.9);
    assertThat(sg.blockSize()).isEqualTo(64);
    assertThat(EngineMetricsParser.parse("process_cpu_seconds_total 1\n")).isNull();
    assertThat(EngineMetricsParser.parse("")).isNull();
  }
}
