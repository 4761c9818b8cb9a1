package io.kvroute.assembly;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.config.ConfigBinder;
import io.kvroute.config.ConfigException;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.testkit.LatencyModel;
import io.kvroute.testkit.VllmSimulator;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The composition root: settings bound by the binder, then the router they describe. */
class RouterAssemblyTest {
  private static final ConfigBinder BINDER = ConfigBinder.create();

  @Test
  void settingsMakeARouterThatRoutes(@TempDir Path dir) throws Exception {
    try (VllmSimulator pod =
        VllmSimulator.builder().name("d0").model("m").latency(LatencyModel.ZERO).build().start()) {
      RouterSettings s =
          BINDER.readYaml(
              "observabilityHeaders: true\n"
                  + "drainTimeout: 1s\n"
                  + "index: { blockSize: 16 }\n"
                  + "endpoints: [{ id: d0, url: \""
                  + pod.baseUrl()
                  + "\", role: decode }]\n",
              RouterSettings.class);
      SimpleMeterRegistry meters = new SimpleMeterRegistry();
      try (RouterAssembly a =
          RouterAssembly.builder(s).baseDirectory(dir).meterRegistry(meters).build()) {
        assertThat(a.router().endpoints()).hasSize(1);
        assertThat(a.discovery()).isEmpty();
        var r =
            a.router()
                .route(
                    InferenceRequest.of(
                        InferenceRequest.Api.COMPLETIONS,
                        "{\"model\":\"m\",\"prompt\":\"hi\",\"max_tokens\":2}"))
                .get(20, TimeUnit.SECONDS);
        r.readAll(1 << 20).get(20, TimeUnit.SECONDS);
        assertThat(r.decision().responseHeaders()).containsEntry("x-kvroute-decode", "d0");
        assertThat(meters.find("kvroute.route").timer()).isNotNull();
      }
    }
  }

  @Test
  void tokenizerApiRenderTokenizesOnTheRenderEndpoints(@TempDir Path dir) throws Exception {
    try (VllmSimulator pod =
        VllmSimulator.builder().name("d0").model("m").latency(LatencyModel.ZERO).build().start()) {
      RouterSettings s =
          BINDER.readYaml(
              "tokenizer: { api: render, timeout: 5s }\n"
                  + "index: { blockSize: 16 }\n"
                  + "endpoints: [{ id: d0, url: \""
                  + pod.baseUrl()
                  + "\", role: decode }]\n",
              RouterSettings.class);
      assertThat(s.tokenizer().vllmApi()).isEqualTo(io.kvroute.scoring.Tokenizers.VllmApi.RENDER);
      try (RouterAssembly a = RouterAssembly.builder(s).baseDirectory(dir).build()) {
        var r =
            a.router()
                .route(
                    InferenceRequest.of(
                        InferenceRequest.Api.CHAT_COMPLETIONS,
                        "{\"model\":\"m\",\"max_tokens\":2,"
                            + "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"))
                .get(20, TimeUnit.SECONDS);
        r.readAll(1 << 20).get(20, TimeUnit.SECONDS);
      }
      assertThat(pod.requests())
          .extracting(io.kvroute.testkit.RecordedRequest::path)
          .contains("/v1/chat/completions/render")
          .doesNotContain("/tokenize");
    }
  }

  @Test
  void aBadTokenizerApiIsNamed() {
    assertThatThrownBy(
            () -> BINDER.readYaml("tokenizer: { api: detokenize }", RouterSettings.class))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("tokenizer.api")
        .hasMessageContaining("must be tokenize or render");
    assertThat(RouterSettings.defaults().tokenizer().api()).isEqualTo("tokenize");
  }

  @Test
  void anUnknownConnectorTypeIsNamedWithASuggestion() {
    RouterSettings s =
        BINDER.readYaml(
            "defaultConnector: { type: nixl2 }\nmodels: { llama: { kvConnector: { type: htp } } }",
            RouterSettings.class);
    assertThatThrownBy(() -> RouterAssembly.builder(s).build())
        .isInstanceOf(ConfigException.class)
        .hasMessageStartingWith("defaultConnector.type: unknown connector type \"nixl2\"");
    RouterSettings model =
        BINDER.readYaml("models: { llama: { kvConnector: { type: htp } } }", RouterSettings.class);
    assertThatThrownBy(() -> RouterAssembly.builder(model).build())
        .hasMessageStartingWith(
            "models.llama.kvConnector.type: unknown connector type \"htp\"; did you mean \"http\"?");
  }

  @Test
  void aSchedulerFileIsReadFromTheBaseDirectory(@TempDir Path dir) throws Exception {
    Files.writeString(
        dir.resolve("picker.yaml"), "plugins: [{ type: nope }]\n", StandardCharsets.UTF_8);
    RouterSettings s = BINDER.readYaml("scheduler: picker.yaml", RouterSettings.class);
    assertThatThrownBy(() -> RouterAssembly.builder(s).baseDirectory(dir).build())
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("picker.yaml")
        .hasMessageContaining("nope");
  }

  @Test
  void aMissingTokenizerNamesItsKey(@TempDir Path dir) {
    RouterSettings s =
        BINDER.readYaml(
            "models: { m: { tokenizer: { path: no-such-dir, fallback: false } } }",
            RouterSettings.class);
    assertThatThrownBy(() -> RouterAssembly.builder(s).baseDirectory(dir).build())
        .isInstanceOf(ConfigException.class)
        .hasMessageStartingWith("models.m.tokenizer.path: ");
  }

  @Test
  void pdIsOnWithAPrefillEndpointOrWhenDiscoverySaysSo() {
    assertThat(
            BINDER
                .readYaml(
                    "endpoints: [{ url: \"http://h:1\", role: prefill }]", RouterSettings.class)
                .pdEnabled())
        .isTrue();
    assertThat(
            BINDER
                .readYaml(
                    "discovery: { kubernetes: { selector: { app: v }, pdDisaggregation: true } }",
                    RouterSettings.class)
                .pdEnabled())
        .isTrue();
    assertThat(RouterSettings.defaults().pdEnabled()).isFalse();
  }
}
