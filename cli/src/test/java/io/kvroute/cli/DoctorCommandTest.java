package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.kvindex.hash.HashAlgorithm;
import io.kvroute.testkit.EngineTokenizer;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.SimTokenizer;
import io.kvroute.testkit.VllmSimulator;
import io.kvroute.tokenizer.hf.HfTokenizer;
import io.kvroute.tokenizer.hf.ReferenceTokenizers;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.UnaryOperator;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code kvroute doctor} against simulated vLLM pods set up right, and wrong in each way it must
 * name: block size, hash seed, hash algorithm, tokens (the engine's own endpoints, and a local chat
 * template), replay, clock, no events, no engine.
 */
class DoctorCommandTest {
  private String out;
  private String err;

  private int run(String... args) {
    CommandLine cl = Main.commandLine();
    StringWriter o = new StringWriter();
    StringWriter e = new StringWriter();
    cl.setOut(new PrintWriter(o));
    cl.setErr(new PrintWriter(e));
    int code = cl.execute(args);
    out = o.toString();
    err = e.toString();
    return code;
  }

  /** A pod as kvroute's defaults expect it: block size 16, sha256, PYTHONHASHSEED unset. */
  private static VllmSimulator pod(UnaryOperator<VllmSimulator.Builder> change) {
    return change
        .apply(
            VllmSimulator.builder()
                .model("m")
                .latency(LatencyModel.ZERO)
                .blockSize(16)
                .hashAlgorithm(HashAlgorithm.SHA256)
                .hashSeed(null))
        .build()
        .start();
  }

  private int doctor(VllmSimulator pod, String... more) {
    List<String> args = new ArrayList<>();
    args.add("doctor");
    args.add("--engine");
    args.add(pod.baseUrl().toString());
    args.add("--events");
    args.add(pod.eventsEndpoint());
    if (!List.of(more).contains("--timeout")) {
      args.add("--timeout");
      args.add("20s");
    }
    args.addAll(List.of(more));
    return run(args.toArray(String[]::new));
  }

  /** The status of a checklist line whose check starts with {@code check}. */
  private String status(String check) {
    Matcher m =
        Pattern.compile("(?m)^(PASS|FAIL|SKIP)  " + Pattern.quote(check) + ".*$").matcher(out);
    assertThat(m.find()).as("no line \"%s\" in:%n%s%s", check, out, err).isTrue();
    return m.group(1);
  }

  /** The line after {@code check}'s: its fix. */
  private String fixOf(String check) {
    int at = out.indexOf("  " + check);
    assertThat(at).as(out).isNotNegative();
    int fix = out.indexOf("fix: ", at);
    return out.substring(fix, out.indexOf('\n', fix));
  }

  private String lineOf(String check) {
    int at = out.indexOf("  " + check);
    return out.substring(at, out.indexOf('\n', at));
  }

  @Test
  void aPodSetUpRightPassesEveryCheck() {
    try (VllmSimulator pod = pod(b -> b)) {
      assertThat(doctor(pod, "--replay", pod.replayEndpoint())).as(out + err).isZero();
      assertThat(status("engine answers")).isEqualTo("PASS");
      assertThat(status("KV events arrive")).isEqualTo("PASS");
      assertThat(lineOf("KV events arrive")).contains("chat").contains("completion");
      assertThat(status("block size")).isEqualTo("PASS");
      assertThat(status("hash algorithm and seed")).isEqualTo("PASS");
      assertThat(lineOf("hash algorithm and seed")).contains("sha256, PYTHONHASHSEED unset");
      assertThat(status("tokens: /tokenize, chat (kvroute's)")).isEqualTo("PASS");
      assertThat(status("tokens: /tokenize, completion (kvroute's)")).isEqualTo("PASS");
      assertThat(status("tokens: render endpoints, chat")).isEqualTo("PASS");
      assertThat(status("tokens: render endpoints, completion")).isEqualTo("PASS");
      assertThat(status("parity of kvroute's predictions")).isEqualTo("PASS");
      assertThat(status("replay endpoint answers")).isEqualTo("PASS");
      assertThat(status("clock skew")).isEqualTo("PASS");
      assertThat(out).contains("all checks passed").doesNotContain("FAIL");
      // the probes went through every endpoint the checklist names
      assertThat(pod.requests())
          .extracting(io.kvroute.testkit.RecordedRequest::path)
          .contains(
              "/tokenize",
              "/v1/chat/completions/render",
              "/v1/completions/render",
              "/v1/chat/completions",
              "/v1/completions");
    }
  }

  @Test
  void anotherBlockSizeIsNamed() {
    try (VllmSimulator pod = pod(b -> b.blockSize(32))) {
      assertThat(doctor(pod)).as(out + err).isEqualTo(2);
      assertThat(status("block size")).isEqualTo("FAIL");
      assertThat(lineOf("block size")).contains("block_size 32").contains("configured with 16");
      assertThat(fixOf("block size")).contains("index.blockSize: 32");
      // the hashing itself is what kvroute expects; the prediction at 16 is not
      assertThat(status("hash algorithm and seed")).isEqualTo("PASS");
      assertThat(status("parity of kvroute's predictions")).isEqualTo("FAIL");
      assertThat(out).contains("BLOCK_SIZE");
      // told the engine's block size, everything passes
      assertThat(doctor(pod, "--block-size", "32")).as(out).isZero();
    }
  }

  @Test
  void anotherSeedIsNamed() {
    try (VllmSimulator pod = pod(b -> b.hashSeed("42"))) {
      assertThat(doctor(pod)).as(out + err).isEqualTo(2);
      assertThat(status("hash algorithm and seed")).isEqualTo("FAIL");
      assertThat(lineOf("hash algorithm and seed"))
          .contains("the engine hashes with sha256, PYTHONHASHSEED=42")
          .contains("kvroute expects sha256, PYTHONHASHSEED unset");
      assertThat(fixOf("hash algorithm and seed")).contains("--hash-seed '42'");
      assertThat(status("parity of kvroute's predictions")).isEqualTo("FAIL");
      assertThat(out).contains("HASH_SEED");
      assertThat(status("block size")).isEqualTo("PASS");
      assertThat(status("tokens: /tokenize, chat (kvroute's)")).isEqualTo("PASS");
      assertThat(doctor(pod, "--hash-seed", "42")).as(out).isZero();
    }
  }

  @Test
  void anotherAlgorithmIsNamed() {
    try (VllmSimulator pod = pod(b -> b.hashAlgorithm(HashAlgorithm.SHA256_CBOR))) {
      assertThat(doctor(pod)).as(out + err).isEqualTo(2);
      assertThat(status("hash algorithm and seed")).isEqualTo("FAIL");
      assertThat(lineOf("hash algorithm and seed"))
          .contains("the engine hashes with sha256_cbor, PYTHONHASHSEED unset");
      assertThat(fixOf("hash algorithm and seed"))
          .contains("--prefix-caching-hash-algo sha256")
          .contains("--hash-algo sha256_cbor");
      assertThat(out).contains("HASH_ALGORITHM");
      assertThat(doctor(pod, "--hash-algo", "sha256_cbor")).as(out).isZero();
    }
    // xxhash with a seed: named too (the doctor tries the usual seeds)
    try (VllmSimulator pod = pod(b -> b.hashAlgorithm(HashAlgorithm.XXHASH).hashSeed("0"))) {
      assertThat(doctor(pod)).isEqualTo(2);
      assertThat(lineOf("hash algorithm and seed")).contains("xxhash, PYTHONHASHSEED=0");
      assertThat(out).contains("HASH_ALGORITHM_AND_SEED");
    }
  }

  /** The gateway's configuration names the engines' hashing: the doctor expects it. */
  @Test
  void theConfigsHashSettingsAreExpected(@TempDir Path dir) throws Exception {
    Path config = dir.resolve("gateway.yaml");
    Files.writeString(
        config,
        "index: { blockSize: 16, hashAlgorithm: sha256_cbor, pythonHashSeed: \"42\" }\n",
        StandardCharsets.UTF_8);
    try (VllmSimulator pod = pod(b -> b.hashAlgorithm(HashAlgorithm.SHA256_CBOR).hashSeed("42"))) {
      assertThat(doctor(pod, "--config", config.toString())).as(out + err).isZero();
      assertThat(out).contains("kvroute expects: sha256_cbor, block size 16, PYTHONHASHSEED=42");
      // the options still win over the file
      assertThat(doctor(pod, "--config", config.toString(), "--hash-seed", "0")).isEqualTo(2);
      assertThat(status("hash algorithm and seed")).isEqualTo("FAIL");
    }
  }

  /** An engine whose /tokenize and render endpoints add a BOS its chat completions do not. */
  private static final EngineTokenizer EXTRA_BOS =
      new EngineTokenizer() {
        @Override
        public int[] encodePrompt(String prompt) {
          int[] ids = SimTokenizer.get().encode(prompt);
          int[] out = new int[ids.length + 1];
          out[0] = 1;
          System.arraycopy(ids, 0, out, 1, ids.length);
          return out;
        }

        @Override
        public int[] encodeChat(JsonNode request) {
          return encodePrompt(
              SimTokenizer.get()
                  .applyChatTemplate(
                      request.get("messages"),
                      request.path("add_generation_prompt").asBoolean(true)));
        }

        @Override
        public int[] encodeText(String text) {
          return EngineTokenizer.simulated().encodeText(text);
        }
      };

  @Test
  void tokenizationEndpointsThatDisagreeWithTheCacheAreNamed() {
    try (VllmSimulator pod = pod(b -> b.endpointTokenizer(EXTRA_BOS))) {
      assertThat(doctor(pod)).as(out + err).isEqualTo(2);
      assertThat(status("tokens: /tokenize, chat (kvroute's)")).isEqualTo("FAIL");
      assertThat(lineOf("tokens: /tokenize, chat (kvroute's)")).contains("from token 0");
      assertThat(fixOf("tokens: /tokenize, chat (kvroute's)")).contains("models.<name>.tokenizer");
      assertThat(status("tokens: render endpoints, completion")).isEqualTo("FAIL");
      assertThat(status("parity of kvroute's predictions")).isEqualTo("FAIL");
      assertThat(out).contains("TOKENS");
      // the hashing is still identified, from the events' own tokens
      assertThat(status("hash algorithm and seed")).isEqualTo("PASS");
      assertThat(status("KV events arrive")).isEqualTo("PASS");
    }
  }

  @Test
  void aLocalChatTemplateOtherThanTheEnginesIsNamed(@TempDir Path dir) throws Exception {
    Path qwen = ReferenceTokenizers.modelDir("qwen3");
    Path template = dir.resolve("other.jinja");
    Files.writeString(
        template,
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
            + "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n\n</think>\n\n"
            + "{% endif %}",
        StandardCharsets.UTF_8);
    Path right = dir.resolve("right.yaml");
    Files.writeString(
        right,
        "index: { blockSize: 16 }\nmodels:\n  m:\n    tokenizer: { path: \"" + qwen + "\" }\n",
        StandardCharsets.UTF_8);
    Path wrong = dir.resolve("wrong.yaml");
    Files.writeString(
        wrong,
        "index: { blockSize: 16 }\nmodels:\n  m:\n    tokenizer: { path: \""
            + qwen
            + "\", chatTemplate: other.jinja }\n",
        StandardCharsets.UTF_8);
    try (HfTokenizer engineTokenizer = HfTokenizer.load(qwen);
        VllmSimulator pod = pod(b -> b.tokenizer(new HfEngineTokenizer(engineTokenizer)))) {
      assertThat(doctor(pod, "--config", right.toString())).as(out + err).isZero();
      assertThat(status("tokens: local tokenizer, chat (kvroute's)")).isEqualTo("PASS");
      assertThat(status("tokens: /tokenize, chat")).isEqualTo("PASS");
      assertThat(out).contains("(" + right + ")");

      assertThat(doctor(pod, "--config", wrong.toString())).as(out + err).isEqualTo(2);
      assertThat(status("tokens: local tokenizer, chat (kvroute's)")).isEqualTo("FAIL");
      assertThat(fixOf("tokens: local tokenizer, chat (kvroute's)")).contains("chatTemplate");
      // completions are not templated: the local tokenizer agrees there
      assertThat(status("tokens: local tokenizer, completion (kvroute's)")).isEqualTo("PASS");
      assertThat(status("tokens: /tokenize, chat")).isEqualTo("PASS");
      assertThat(status("parity of kvroute's predictions")).isEqualTo("FAIL");
    }
  }

  @Test
  void aReplayEndpointThatDoesNotAnswerIsNamed() throws Exception {
    int port;
    try (ServerSocket s = new ServerSocket(0)) {
      port = s.getLocalPort();
    }
    try (VllmSimulator pod = pod(b -> b)) {
      assertThat(doctor(pod, "--replay", "tcp://127.0.0.1:" + port)).as(out + err).isEqualTo(2);
      assertThat(status("replay endpoint answers")).isEqualTo("FAIL");
      // a replay is waited for at most 5 s (vLLM answers within ~100 ms)
      assertThat(lineOf("replay endpoint answers")).contains("no answer within 5000 ms");
      assertThat(fixOf("replay endpoint answers")).contains("replay_endpoint");
      assertThat(status("parity of kvroute's predictions")).isEqualTo("PASS");
    }
  }

  @Test
  void aSkewedClockIsNamed() {
    try (VllmSimulator pod =
        pod(b -> b.clock(Clock.offset(Clock.systemUTC(), Duration.ofSeconds(30))))) {
      assertThat(doctor(pod)).as(out + err).isEqualTo(2);
      assertThat(status("clock skew")).isEqualTo("FAIL");
      assertThat(lineOf("clock skew")).contains("ahead of this machine's clock");
      assertThat(fixOf("clock skew")).contains("NTP");
      assertThat(status("hash algorithm and seed")).isEqualTo("PASS");
    }
  }

  @Test
  void noEventsAndNoEngineAreNamed() throws Exception {
    int port;
    try (ServerSocket s = new ServerSocket(0)) {
      port = s.getLocalPort();
    }
    try (VllmSimulator pod = pod(b -> b.events(false))) {
      assertThat(
              run(
                  "doctor",
                  "--engine",
                  pod.baseUrl().toString(),
                  "--events",
                  "tcp://127.0.0.1:" + port,
                  "--timeout",
                  "5s"))
          .as(out + err)
          .isEqualTo(2);
      assertThat(status("KV events arrive")).isEqualTo("FAIL");
      assertThat(fixOf("KV events arrive")).contains("enable_kv_cache_events");
      assertThat(status("block size")).isEqualTo("SKIP");
      assertThat(status("hash algorithm and seed")).isEqualTo("SKIP");
      assertThat(status("tokens: /tokenize, chat (kvroute's)")).isEqualTo("SKIP");
      assertThat(status("clock skew")).isEqualTo("SKIP");
      assertThat(out).contains("1 check(s) failed");
    }
    assertThat(
            run(
                "doctor",
                "--engine",
                "http://127.0.0.1:" + port,
                "--events",
                "tcp://127.0.0.1:" + port,
                "--timeout",
                "2s"))
        .isEqualTo(2);
    assertThat(status("engine answers")).isEqualTo("FAIL");
    assertThat(fixOf("engine answers")).contains("--engine");
    assertThat(run("doctor", "--engine", "ftp://x", "--events", "tcp://127.0.0.1:1")).isEqualTo(2);
    assertThat(err).contains("--engine: not an http(s) URL");
    assertThat(
            run(
                "doctor",
                "--engine",
                "http://127.0.0.1:1",
                "--events",
                "tcp://127.0.0.1:1",
                "--hash-algo",
                "md5"))
        .isEqualTo(2);
    assertThat(err).contains("unknown hash algorithm \"md5\"");
  }
}
