package io.kvroute.router;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class UsageScannerTest {

  private static UsageScanner scan(String body, int chunk) {
    UsageScanner s = new UsageScanner();
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    for (int i = 0; i < b.length; i += chunk) {
      ByteBuffer wrapped = ByteBuffer.wrap(b, i, Math.min(chunk, b.length - i));
      // Heap buffers, slices with an array offset, and buffers without an accessible array.
      ByteBuffer buf =
          switch ((i / chunk) % 3) {
            case 0 -> wrapped;
            case 1 -> wrapped.slice();
            default -> wrapped.asReadOnlyBuffer();
          };
      int before = buf.position();
      s.scan(buf);
      assertThat(buf.position()).isEqualTo(before);
    }
    return s;
  }

  @Test
  void findsTheUsageOfAJsonBodyAcrossAnyChunking() {
    String body =
        "{\"choices\":[{\"text\":\"x\"}],\"usage\":{\"prompt_tokens\": 48,\"total_tokens\":52,"
            + "\"completion_tokens\":4,\"prompt_tokens_details\":{\"cached_tokens\" : 32}}}";
    for (int chunk = 1; chunk <= body.length(); chunk++) {
      UsageScanner s = scan(body, chunk);
      assertThat(s.promptTokens()).as("chunk %d", chunk).isEqualTo(48);
      assertThat(s.cachedTokens()).as("chunk %d", chunk).isEqualTo(32);
    }
  }

  @Test
  void takesTheLastUsageOfAnSseStream() {
    String sse =
        "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":null}\n\n"
            + "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":2,"
            + "\"prompt_tokens_details\":{\"cached_tokens\":96}}}\n\ndata: [DONE]\n\n";
    UsageScanner s = scan(sse, 7);
    assertThat(s.promptTokens()).isEqualTo(100);
    assertThat(s.cachedTokens()).isEqualTo(96);
  }

  @Test
  void ignoresKeysInsideStringsAndMissingValues() {
    UsageScanner s =
        scan(
            "{\"text\":\"say \\\"cached_tokens\\\": 7\",\"usage\":{\"prompt_tokens\":5,"
                + "\"prompt_tokens_details\":{\"cached_tokens\":null}}}",
            3);
    assertThat(s.cachedTokens()).isEqualTo(-1);
    assertThat(s.promptTokens()).isEqualTo(5);
  }
}
