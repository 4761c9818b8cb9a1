package io.kvroute.router;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.lists;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class UsageScannerTest {

  /** Feeds {@code body} in chunks to {@link UsageScanner#keep}, then finishes. */
  private static UsageScanner keep(String body, int chunk) {
    UsageScanner s = new UsageScanner();
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    for (int i = 0; i < b.length; i += chunk) {
      ByteBuffer buf = ByteBuffer.wrap(b, i, Math.min(chunk, b.length - i));
      ByteBuffer view = (i / chunk) % 2 == 0 ? buf : buf.asReadOnlyBuffer();
      int before = view.position();
      s.keep(view);
      assertThat(view.position()).isEqualTo(before);
    }
    return s.finish();
  }

  @Test
  void theTailOfALongStreamHoldsItsUsage() {
    StringBuilder sse = new StringBuilder();
    for (int i = 0; i < 200; i++) {
      // events that mention the keys in strings and carry an older usage block
      sse.append("data: {\"choices\":[{\"text\":\" \\\"prompt_tokens\\\": 7\"}],")
          .append(
              "\"usage\":{\"prompt_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":0}}}\n\n");
    }
    sse.append(
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4096,\"completion_tokens\":9,"
            + "\"prompt_tokens_details\":{\"cached_tokens\":4080}}}\n\ndata: [DONE]\n\n");
    String body = sse.toString();
    assertThat(body.length()).isGreaterThan(10 * UsageScanner.TAIL);
    for (int chunk :
        new int[] {1, 7, 64, 1000, UsageScanner.TAIL - 1, UsageScanner.TAIL, 5000, body.length()}) {
      UsageScanner s = keep(body, chunk);
      assertThat(s.promptTokens()).as("chunk %d", chunk).isEqualTo(4096);
      assertThat(s.cachedTokens()).as("chunk %d", chunk).isEqualTo(4080);
    }
    UsageScanner none = keep("{\"choices\":[]}", 3);
    assertThat(none.promptTokens()).isEqualTo(-1);
  }

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

  private static final String[] FRAGMENTS = {
    "\"prompt_tokens\"",
    "\"cached_tokens\"",
    "\"input_tokens\"",
    "\"prompt_tokens",
    "\\\"cached_tokens\\\"",
    "\"",
    ":",
    " ",
    "\n",
    "0",
    "7",
    "12345",
    "null",
    ",",
    "{",
    "}",
    "\"text\"",
    "prompt_tokens",
    "\"\"",
    "data: ",
    "\"prompt_tokens_details\"",
    "x",
    "\"prompt_tokens\":41",
    "\"cached_tokens\" : 9",
    "\"\"prompt_tokens\":3",
    "\"cached_tokens\":"
  };

  /**
   * Heap buffers (compared at each quote a whole key fits after) find what the byte-by-byte state
   * machine finds (direct buffers, one byte at a time), for bodies made of keys, partial keys,
   * escaped keys, quotes, colons, whitespace and numbers, in any chunking.
   */
  @Test
  void heapBuffersFindWhatTheByteByByteScanFinds() {
    qt().withExamples(2000)
        .forAll(
            lists().of(integers().between(0, FRAGMENTS.length - 1)).ofSizeBetween(0, 60),
            integers().between(1, 300))
        .checkAssert(
            (parts, chunk) -> {
              StringBuilder body = new StringBuilder();
              for (int p : parts) {
                body.append(FRAGMENTS[p]);
              }
              byte[] b = body.toString().getBytes(StandardCharsets.UTF_8);
              UsageScanner reference = new UsageScanner();
              for (byte x : b) {
                reference.scan(ByteBuffer.allocateDirect(1).put(x).flip());
              }
              UsageScanner heap = new UsageScanner();
              for (int i = 0; i < b.length; i += chunk) {
                heap.scan(ByteBuffer.wrap(b, i, Math.min(chunk, b.length - i)).slice());
              }
              assertThat(heap.promptTokens())
                  .as(body.toString())
                  .isEqualTo(reference.promptTokens());
              assertThat(heap.cachedTokens())
                  .as(body.toString())
                  .isEqualTo(reference.cachedTokens());
            });
  }
}
