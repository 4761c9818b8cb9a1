package io.kvroute.benchmarks.tokenizer;

import io.kvroute.tokenizer.hf.ChatRequest;
import io.kvroute.tokenizer.hf.HfTokenizer;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.TearDown;

/**
 * Local tokenization with the real Qwen3 tokenizer (result cache off, one thread): an 8,192-token
 * completion prompt, and a 20-turn chat rendered through the model's template and tokenized; for
 * both engines ({@code JAVA}: kvroute's byte-level BPE; {@code NATIVE}: the Hugging Face library
 * through DJL).
 *
 * <p>Run with {@link RemoteTokenizeBenchmark} in the same invocation to get the local/remote ratio:
 * {@code java -jar benchmarks/target/benchmarks.jar 'LocalTokenizer|RemoteTokenize|PickWithLocal'}.
 */
public class LocalTokenizerBenchmark extends TokenizerBenchmarkDefaults {
  @Param({"JAVA", "NATIVE"})
  HfTokenizer.Engine engine;

  private HfTokenizer tokenizer;
  private String prompt8k;
  private ChatRequest chat20;

  @Setup
  public void setup() {
    tokenizer = TokenizerFixtures.qwen3(engine);
    prompt8k = TokenizerFixtures.prompt(tokenizer, 8192);
    chat20 = TokenizerFixtures.chat20(tokenizer);
    System.out.printf(
        "%n[fixture] engine=%s prompt8k: %d chars -> %d tokens; chat20: %d messages -> %d tokens%n",
        tokenizer.engine(),
        prompt8k.length(),
        tokenizer.encode(prompt8k).length,
        chat20.messages().size(),
        tokenizer.encodeChat(chat20).length);
  }

  @TearDown
  public void close() {
    tokenizer.close();
  }

  /** An 8,192-token prompt as vLLM tokenizes a completion. */
  @Benchmark
  public int[] tokenize8k() {
    return tokenizer.encode(prompt8k);
  }

  /** A 20-turn chat: template rendered, then tokenized. */
  @Benchmark
  public int[] renderAndTokenizeChat20() {
    return tokenizer.encodeChat(chat20);
  }

  /** The template alone, for the split of the chat figure. */
  @Benchmark
  public String renderChat20() {
    return tokenizer.renderChat(chat20);
  }
}
