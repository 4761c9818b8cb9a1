package io.kvroute.tokenizer.hf;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.scoring.SchedulingRequest;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class HfTokenizerTest {
  private static HfTokenizer qwen;

  @BeforeAll
  static void load() {
    qwen = ReferenceTokenizers.load("qwen3");
  }

  @AfterAll
  static void close() {
    qwen.close();
  }

  @Test
  void completionsGetSpecialTokensAndChatsDoNot() {
    try (HfTokenizer bos = ReferenceTokenizers.load("llama3-bos")) {
      assertThat(bos.encode("Hello world")).containsExactly(128000, 9906, 1917);
      assertThat(bos.encode("Hello world", false)).containsExactly(9906, 1917);
      int[] chat = bos.encodeChat(ChatRequest.builder().message("user", "Hi").build());
      assertThat(chat[0]).isEqualTo(128000);
      assertThat(chat[1]).isNotEqualTo(128000); // the template's BOS only, not a second one
    }
  }

  @Test
  void tokenizeFollowsTheSchedulingRequest() {
    SchedulingRequest chat =
        SchedulingRequest.builder()
            .model("qwen3")
            .messages(List.of(new SchedulingRequest.ChatMessage("user", "Hi")))
            .build();
    int[] ids = qwen.tokenize(chat).toCompletableFuture().join();
    assertThat(ids)
        .containsExactly(qwen.encodeChat(ChatRequest.builder().message("user", "Hi").build()));
    assertThat(qwen.decode(ids, false))
        .isEqualTo("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    SchedulingRequest prompt =
        SchedulingRequest.builder().model("qwen3").prompt("Hello world").build();
    assertThat(qwen.tokenize(prompt).toCompletableFuture().join()).containsExactly(9707, 1879);
    SchedulingRequest given =
        SchedulingRequest.builder().model("qwen3").tokenIds(new int[] {5, 6}).build();
    assertThat(qwen.tokenize(given).toCompletableFuture().join()).containsExactly(5, 6);
    assertThat(qwen.tokenize(SchedulingRequest.builder().model("qwen3").build()))
        .isCompletedExceptionally();
  }

  @Test
  void toolsAndTemplateOptionsReachTheTemplate() {
    String inputs =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
            + "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"type\":\"function\","
            + "\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}}]},"
            + "{\"role\":\"tool\",\"content\":\"sunny\"}],"
            + "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
            + "\"description\":\"Weather of a city\",\"parameters\":{\"type\":\"object\","
            + "\"properties\":{\"city\":{\"type\":\"string\"}}}}}],"
            + "\"chat_template_kwargs\":{\"enable_thinking\":false}}";
    SchedulingRequest r =
        SchedulingRequest.builder()
            .model("qwen3")
            .messages(
                List.of(
                    new SchedulingRequest.ChatMessage("user", "Weather in Paris?"),
                    new SchedulingRequest.ChatMessage("assistant", ""),
                    new SchedulingRequest.ChatMessage("tool", "sunny")))
            .chatTemplateInputs(inputs)
            .build();
    int[] ids = qwen.tokenize(r).toCompletableFuture().join();
    assertThat(ids).containsExactly(qwen.encodeChat(ChatRequest.fromJson(inputs)));
    String text = qwen.decode(ids, false);
    assertThat(text).contains("get_weather").contains("<tool_response>").contains("<think>");
    int[] plain =
        qwen.tokenize(r.toBuilder().chatTemplateInputs(null).build()).toCompletableFuture().join();
    assertThat(plain).isNotEqualTo(ids);
  }

  @Test
  void theCacheIsBoundedAndMetered() {
    SimpleMeterRegistry meters = new SimpleMeterRegistry();
    try (HfTokenizer t =
        ReferenceTokenizers.builder("qwen3").cache(2, 1000).meterRegistry(meters).build()) {
      int[] a = t.encode("alpha beta");
      int[] again = t.encode("alpha beta");
      assertThat(again).containsExactly(a);
      again[0] = -1; // callers get copies
      assertThat(t.encode("alpha beta")).containsExactly(a);
      t.encode("gamma");
      t.encode("delta");
      assertThat(t.cacheSize()).isEqualTo(2);
      assertThat(t.cacheHits()).isEqualTo(2);
      assertThat(meters.get("kvroute.tokenizer.local.cache.hits").functionCounter().count())
          .isEqualTo(2);
      assertThat(
              meters
                  .get("kvroute.tokenizer.local.duration")
                  .tags("kind", "completion", "model", "qwen3")
                  .timer()
                  .count())
          .isEqualTo(3);
      t.encode("x".repeat(5000)); // more tokens than the cache holds: not cached
      assertThat(t.cacheSize()).isEqualTo(2);
    }
  }

  @Test
  void concurrentCallersGetTheSameIds() throws Exception {
    List<ReferenceVectors.Case> cases =
        ReferenceVectors.all().stream().filter(c -> c.tokenizer().equals("qwen3")).toList();
    try (HfTokenizer t = ReferenceTokenizers.builder("qwen3").cache(16, 100_000).build()) {
      ExecutorService pool = Executors.newFixedThreadPool(4);
      try {
        List<Future<String>> results = new ArrayList<>();
        for (int round = 0; round < 3; round++) {
          for (ReferenceVectors.Case c : cases) {
            results.add(
                pool.submit(
                    () -> {
                      int[] ids =
                          c.isChat()
                              ? t.encodeChat(ChatRequest.fromJson(c.json().get("request")))
                              : t.encode(
                                  c.json().get("prompt").asText(),
                                  c.json().get("add_special_tokens").booleanValue());
                      String m = c.describeMismatch(ids);
                      return m == null ? null : c.id() + ": " + m;
                    }));
          }
        }
        for (Future<String> f : results) {
          assertThat(f.get(120, TimeUnit.SECONDS)).isNull();
        }
      } finally {
        pool.shutdownNow();
      }
    }
  }

  @Test
  void huggingFaceCacheLayout(@TempDir Path hub) throws Exception {
    Path repo = HfTokenizer.huggingFaceCacheDir(hub, "Qwen/Qwen3-0.6B");
    assertThat(repo.getFileName().toString()).isEqualTo("models--Qwen--Qwen3-0.6B");
    Path src = ReferenceTokenizers.modelDir("qwen3");
    for (String rev : List.of("aaaa", "bbbb")) {
      Path snap = repo.resolve("snapshots").resolve(rev);
      Files.createDirectories(snap);
      Files.createSymbolicLink(snap.resolve("tokenizer.json"), src.resolve("tokenizer.json"));
      Files.copy(src.resolve("tokenizer_config.json"), snap.resolve("tokenizer_config.json"));
    }
    Files.createDirectories(repo.resolve("refs"));
    Files.writeString(repo.resolve("refs/main"), "bbbb");
    assertThat(HfTokenizer.resolveModelDir(repo, null)).isEqualTo(repo.resolve("snapshots/bbbb"));
    assertThat(HfTokenizer.resolveModelDir(repo, "aaaa")).isEqualTo(repo.resolve("snapshots/aaaa"));
    assertThatThrownBy(() -> HfTokenizer.resolveModelDir(repo, "cccc"))
        .isInstanceOf(TokenizerLoadException.class)
        .hasMessageContaining("revision \"cccc\"");
    // a chat_template.jinja next to the files wins over tokenizer_config.json's template
    Files.writeString(
        repo.resolve("snapshots/bbbb/chat_template.jinja"),
        "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}",
        StandardCharsets.UTF_8);
    try (HfTokenizer t = HfTokenizer.builder().huggingFaceCache(hub, "Qwen/Qwen3-0.6B").build()) {
      assertThat(t.modelName()).isEqualTo("Qwen/Qwen3-0.6B");
      assertThat(t.renderChat(ChatRequest.builder().message("user", "x").build()))
          .isEqualTo("[user:x]");
    }
    assertThatThrownBy(() -> HfTokenizer.load(hub))
        .isInstanceOf(TokenizerLoadException.class)
        .hasMessageContaining("no tokenizer.json in");
  }

  @Test
  void continueFinalMessageStopsAfterTheLastMessage() {
    ChatRequest req =
        ChatRequest.builder()
            .message("user", "Write a haiku")
            .message("assistant", "Autumn moonlight ")
            .addGenerationPrompt(false)
            .continueFinalMessage(true)
            .build();
    // Qwen3 keeps the message's trailing space: the cut keeps it (transformers' first branch)
    assertThat(qwen.renderChat(req))
        .isEqualTo(
            "<|im_start|>user\nWrite a haiku<|im_end|>\n<|im_start|>assistant\n<think>\n\n"
                + "</think>\n\nAutumn moonlight ");
    // Llama 3 trims the content: the cut falls right after the stripped text (second branch)
    try (HfTokenizer llama = ReferenceTokenizers.load("llama3")) {
      assertThat(llama.renderChat(req))
          .endsWith("<|start_header_id|>assistant<|end_header_id|>\n\nAutumn moonlight");
    }
    assertThatThrownBy(
            () -> ChatRequest.builder().message("user", "x").continueFinalMessage(true).build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("continue_final_message");
  }

  @Test
  void requestNormalisationFollowsVllm() {
    ChatRequest r =
        ChatRequest.fromJson(
            "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                + "{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}},{\"type\":\"text\",\"text\":\"b\"}]},"
                + "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"1\",\"type\":\"function\","
                + "\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\": 1}\"}}]},"
                + "{\"role\":\"tool\",\"tool_call_id\":\"1\",\"content\":\"ok\"}],"
                + "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
                + "\"chat_template_kwargs\":{\"enable_thinking\":false}}");
    assertThat(r.messages().get(0)).containsEntry("content", "a\nb");
    assertThat(r.messages().get(1)).containsEntry("content", "");
    @SuppressWarnings("unchecked")
    Map<String, Object> call =
        (Map<String, Object>) ((List<Object>) r.messages().get(1).get("tool_calls")).get(0);
    assertThat(call.get("function")).isEqualTo(Map.of("name", "f", "arguments", Map.of("x", 1L)));
    assertThat(r.messages().get(2)).containsEntry("tool_call_id", "1");
    assertThat(r.tools().orElseThrow().get(0).toString())
        .isEqualTo("{type=function, function={name=f, description=null, parameters=null}}");
    assertThat(qwen.renderChat(r)).endsWith("<|im_start|>assistant\n<think>\n\n</think>\n\n");
    assertThatThrownBy(() -> ChatRequest.fromJson("{\"messages\":3}"))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(
            () ->
                ChatRequest.fromJson(
                    "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                        + "\"chat_template_kwargs\":{\"chat_template\":\"x\"}}"))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aModelWithoutTemplateFailsChatsClearly(@TempDir Path dir) throws Exception {
    Files.createSymbolicLink(
        dir.resolve("tokenizer.json"),
        ReferenceTokenizers.modelDir("qwen3").resolve("tokenizer.json"));
    try (HfTokenizer t = HfTokenizer.load(dir)) {
      assertThat(t.hasChatTemplate()).isFalse();
      assertThat(t.encode("Hello world")).containsExactly(9707, 1879);
      assertThatThrownBy(() -> t.encodeChat(ChatRequest.builder().message("user", "x").build()))
          .isInstanceOf(ChatTemplateException.class)
          .hasMessageContaining("chat template");
    }
    try (HfTokenizer t =
        HfTokenizer.builder().path(dir).chatTemplate("{{ messages[0].content }}").build()) {
      assertThat(t.renderChat(ChatRequest.builder().message("user", "only").build()))
          .isEqualTo("only");
    }
    assertThatThrownBy(() -> HfTokenizer.builder().path(dir).chatTemplate("{% if %}").build())
        .isInstanceOf(TokenizerLoadException.class);
  }
}
