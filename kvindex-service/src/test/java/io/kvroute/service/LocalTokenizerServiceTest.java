package io.kvroute.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** {@code tokenizer.path}: prompts tokenized in process, {@code url} optional (the fallback). */
class LocalTokenizerServiceTest {
  private static final HttpClient HTTP = HttpClient.newHttpClient();

  private static ServiceConfig config(String tokenizer) {
    String json =
        "{\"model\":\"m\",\"http\":{\"port\":0},\"pods\":[{\"id\":\"p\",\"events\":\"tcp://127.0.0.1:1\"}],"
            + "\"tokenizer\":"
            + tokenizer
            + "}";
    return ServiceConfig.parse(json.getBytes(StandardCharsets.UTF_8), Path.of("/etc/kvroute"));
  }

  @Test
  void pathMakesTheUrlOptionalAndIsResolvedAgainstTheConfigDirectory() {
    ServiceConfig c = config("{\"path\":\"models/qwen\",\"revision\":\"main\"}");
    assertThat(c.tokenizer().orElseThrow().path()).contains(Path.of("/etc/kvroute/models/qwen"));
    assertThat(c.tokenizer().orElseThrow().revision()).contains("main");
    assertThat(c.tokenizer().orElseThrow().hasRemote()).isFalse();
    assertThatThrownBy(() -> config("{\"timeout_ms\":5}"))
        .isInstanceOf(ServiceConfigException.class)
        .hasMessageContaining("tokenizer.path");
  }

  @Test
  void aPathWithoutALocalTokenizerIsAConfigurationError() {
    ServiceConfig c = config("{\"path\":\"/models/qwen\"}");
    assertThatThrownBy(() -> KvIndexService.builder(c).withoutEventFeed().start())
        .isInstanceOf(ServiceConfigException.class)
        .hasMessageContaining("localTokenizer");
  }

  @Test
  void promptsAreTokenizedInProcess() throws Exception {
    AtomicInteger calls = new AtomicInteger();
    ServiceConfig c = config("{\"path\":\"/models/qwen\"}");
    try (KvIndexService s =
        KvIndexService.builder(c)
            .withoutEventFeed()
            .localTokenizer(
                p -> {
                  calls.incrementAndGet();
                  return new int[] {1, 2, 3};
                })
            .start()) {
      HttpResponse<String> r =
          HTTP.send(
              HttpRequest.newBuilder(s.baseUri().resolve("/api/v1/score"))
                  .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\":\"hello\"}"))
                  .header("Content-Type", "application/json")
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
      assertThat(calls).hasValue(1);
      String metrics =
          HTTP.send(
                  HttpRequest.newBuilder(URI.create(s.baseUri() + "/metrics")).build(),
                  HttpResponse.BodyHandlers.ofString())
              .body();
      assertThat(metrics).contains("kvroute_service_tokenizer_local_total 1.0");
    }
  }
}
