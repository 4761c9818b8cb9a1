package io.kvroute.envoy.internal;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class UsageScannerTest {
  private static byte[] b(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void aJsonBodyGivesItsUsage() {
    UsageScanner s = new UsageScanner(false, 1 << 20);
    s.feed(b("{\"id\":\"x\",\"usage\":{\"prompt_tokens\":12,"));
    s.feed(b("\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":8}}}"));
    assertThat(s.finish()).isEqualTo(new UsageScanner.Usage(12, 3, 8));
  }

  @Test
  void sseUsageSplitAcrossChunksIsFoundInTheLastEvent() {
    UsageScanner s = new UsageScanner(true, 1 << 20);
    String events =
        "data: {\"choices\":[{\"text\":\"a\"}],\"usage\":null}\n\n"
            + "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":4,"
            + "\"prompt_tokens_details\":{\"cached_tokens\":32}}}\r\n\r\n"
            + "data: [DONE]\n\n";
    byte[] all = b(events);
    for (int i = 0; i < all.length; i += 7) {
      s.feed(java.util.Arrays.copyOfRange(all, i, Math.min(all.length, i + 7)));
    }
    assertThat(s.finish()).isEqualTo(new UsageScanner.Usage(40, 4, 32));
  }

  @Test
  void missingPartsAreUnknown() {
    UsageScanner s = new UsageScanner(false, 1 << 20);
    s.feed(b("{\"usage\":{\"prompt_tokens\":5}}"));
    UsageScanner.Usage u = s.finish();
    assertThat(u).isEqualTo(new UsageScanner.Usage(5, -1, -1));
    assertThat(u.known()).isTrue();
    assertThat(new UsageScanner(true, 10).finish().known()).isFalse();
  }

  @Test
  void bodiesAndLinesOverTheLimitAreSkippedNotKept() {
    UsageScanner json = new UsageScanner(false, 16);
    json.feed(b("{\"usage\":{\"prompt_tokens\":5}}"));
    assertThat(json.finish().known()).isFalse();
    UsageScanner sse = new UsageScanner(true, 64);
    sse.feed(b("data: " + "x".repeat(200) + "\n"));
    sse.feed(b("data: {\"usage\":{\"prompt_tokens\":7}}\n"));
    assertThat(sse.finish()).isEqualTo(new UsageScanner.Usage(7, -1, -1));
  }

  @Test
  void garbageIsIgnored() {
    UsageScanner s = new UsageScanner(true, 1 << 10);
    s.feed(b("data: {\"prompt_tokens\" oops\n"));
    s.feed(b("event: x\n"));
    assertThat(s.finish().known()).isFalse();
  }
}
