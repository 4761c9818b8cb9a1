package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.tokenizer.hf.ReferenceTokenizers;
import io.kvroute.tokenizer.hf.ReferenceVectors;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** {@code kvroute tokenize} against the reference vectors (real Qwen3 and Llama 3 files). */
class TokenizeCommandTest {
  private String out;
  private String err;

  private int run(String... args) {
    CommandLine cl = new CommandLine(new Main());
    StringWriter o = new StringWriter();
    StringWriter e = new StringWriter();
    cl.setOut(new PrintWriter(o));
    cl.setErr(new PrintWriter(e));
    int code = cl.execute(args);
    out = o.toString();
    err = e.toString();
    return code;
  }

  private static ReferenceVectors.Case reference(String id) {
    return ReferenceVectors.all().stream().filter(c -> c.id().equals(id)).findFirst().orElseThrow();
  }

  private static int[] ids(String json) {
    String list = json.substring(json.indexOf('[') + 1, json.lastIndexOf(']'));
    if (list.isBlank()) {
      return new int[0];
    }
    String[] parts = list.split(",");
    int[] ids = new int[parts.length];
    for (int i = 0; i < parts.length; i++) {
      ids[i] = Integer.parseInt(parts[i].trim());
    }
    return ids;
  }

  @Test
  void aChatFileGivesTheReferenceIds(@TempDir Path dir) throws Exception {
    ReferenceVectors.Case c = reference("qwen3/chat/tool-call-roundtrip");
    Path chat = dir.resolve("chat.json");
    Files.writeString(chat, c.json().get("request").toString(), StandardCharsets.UTF_8);
    String model = ReferenceTokenizers.modelDir("qwen3").toString();
    assertThat(run("tokenize", "--model-dir", model, "--chat", chat.toString())).as(err).isZero();
    assertThat(out).startsWith("{\"count\":");
    assertThat(c.describeMismatch(ids(out))).isNull();
    assertThat(run("tokenize", "--model-dir", model, "--chat", chat.toString(), "--render"))
        .isZero();
    assertThat(out).isEqualTo(c.json().get("rendered").asText());
  }

  @Test
  void aPromptGetsSpecialTokensAsACompletion() {
    ReferenceVectors.Case c = reference("qwen3/completion/plain/0");
    String model = ReferenceTokenizers.modelDir("qwen3").toString();
    assertThat(run("tokenize", "--model-dir", model, "--prompt", c.json().get("prompt").asText()))
        .isZero();
    assertThat(c.describeMismatch(ids(out))).isNull();
  }

  @Test
  void aHuggingFaceCacheDirectoryIsResolvedOffline(@TempDir Path hub) throws Exception {
    Path repo = hub.resolve("models--Qwen--Qwen3-0.6B");
    Path snap = repo.resolve("snapshots").resolve("0123abcd");
    Files.createDirectories(snap);
    Files.createDirectories(repo.resolve("refs"));
    Files.writeString(repo.resolve("refs").resolve("main"), "0123abcd\n");
    Path src = ReferenceTokenizers.modelDir("qwen3");
    Files.createSymbolicLink(snap.resolve("tokenizer.json"), src.resolve("tokenizer.json"));
    Files.createSymbolicLink(
        snap.resolve("tokenizer_config.json"), src.resolve("tokenizer_config.json"));
    assertThat(run("tokenize", "--model-dir", repo.toString(), "--prompt", "Hello world")).isZero();
    assertThat(out.trim()).isEqualTo("{\"count\":2,\"tokens\":[9707,1879]}");
  }

  @Test
  void errorsAreReportedWithExitCode2(@TempDir Path dir) {
    assertThat(run("tokenize", "--model-dir", dir.toString(), "--prompt", "x")).isEqualTo(2);
    assertThat(err).contains("no tokenizer.json in");
  }
}
