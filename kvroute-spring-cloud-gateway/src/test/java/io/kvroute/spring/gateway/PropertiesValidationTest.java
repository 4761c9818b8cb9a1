package io.kvroute.spring.gateway;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.router.KvRouter;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/** Invalid {@code kvroute.*} properties stop the application with a message naming the property. */
class PropertiesValidationTest {
  private final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withConfiguration(AutoConfigurations.of(KvRouteAutoConfiguration.class))
          .withPropertyValues(
              "kvroute.endpoints[0].url=http://127.0.0.1:18000", "kvroute.endpoints[0].id=d0");

  @ParameterizedTest(name = "{0}")
  @CsvSource(
      delimiter = '|',
      textBlock =
          """
          bad url            | kvroute.endpoints[1].url=http//x                          | kvroute.endpoints[1].url: not an http(s) URL: "http//x"
          missing url        | kvroute.endpoints[1].id=d1                                 | kvroute.endpoints[1].url: is required
          bad role           | kvroute.endpoints[1].url=http://h:1,kvroute.endpoints[1].role=decoder | kvroute.endpoints[1].role: must be one of prefill, decode, both
          duplicate id       | kvroute.endpoints[1].url=http://h:1,kvroute.endpoints[1].id=d0 | kvroute.endpoints[1].id: duplicate id "d0"
          bad publisher      | kvroute.endpoints[1].url=http://h:1,kvroute.endpoints[1].kv-events.publisher=udp://h:1 | kvroute.endpoints[1].kv-events.publisher: must be a tcp:// or ipc:// endpoint
          bad block size     | kvroute.index.block-size=0                                 | kvroute.index.block-size: must be >= 1, was 0
          unknown connector  | kvroute.default-connector.type=nixl2                       | kvroute.default-connector.type: unknown connector type
          bad connector key  | kvroute.models[llama].kv-connector.timeouts.prefil=3s      | kvroute.models[llama].kv-connector.timeouts
          bad duration       | kvroute.models[llama].kv-connector.timeouts.prefill=soon   | kvroute.models[llama].kv-connector.timeouts.prefill
          tokenizer path     | kvroute.models[llama].tokenizer.revision=main              | kvroute.models[llama].tokenizer.path: is required
          missing tokenizer  | kvroute.models[llama].tokenizer.path=/nowhere/at/all        | kvroute.models[llama].tokenizer.path
          missing scheduler  | kvroute.scheduler=/nowhere/picker.yaml                     | /nowhere/picker.yaml
          bad mode           | kvroute.mode=proxy                                         | kvroute.mode
          zero body limit    | kvroute.max-request-size=0                                 | kvroute.max-request-size: must be in [1B, 2GB)
          unknown key        | kvroute.endpoint[0].url=http://h:1                         | kvroute.endpoint: unknown key; did you mean "endpoints"?
          nested unknown key | kvroute.index.block-sise=16                                | kvroute.index.block-sise: unknown key; did you mean "blockSize"?
          redis not present  | kvroute.index.backend=redis                                | kvroute.index.backend: needs io.kvroute:kvindex-redis on the class path
          k8s not present    | kvroute.discovery.kubernetes.selector.app=vllm             | kvroute.discovery.kubernetes: needs io.kvroute:kvroute-kubernetes on the class path
          """)
  void aBadPropertyIsNamed(String name, String properties, String message) {
    runner
        .withPropertyValues(properties.split(","))
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(messages(context.getStartupFailure())).contains(message);
            });
  }

  @Test
  void goodPropertiesMakeARouter() {
    runner
        .withPropertyValues(
            "kvroute.endpoints[1].url=http://127.0.0.1:18001",
            "kvroute.endpoints[1].role=prefill",
            "kvroute.models[llama].kv-connector.type=http",
            "kvroute.models[llama].kv-connector.timeouts.prefill=30s")
        .run(
            context -> {
              assertThat(context).hasNotFailed().hasSingleBean(KvRouter.class);
              assertThat(context.getBean(KvRouter.class).endpoints()).hasSize(2);
              assertThat(context).hasSingleBean(KvRouteGlobalFilter.class);
            });
  }

  /**
   * Environment variables bind too (as Spring maps them), but one that names no kvroute key (the
   * CLI's {@code KVROUTE_ADMIN_TOKEN}) does not stop the application.
   */
  @Test
  void environmentVariablesBindAndStrangersAmongThemAreIgnored() {
    runner
        .withInitializer(
            context ->
                context
                    .getEnvironment()
                    .getPropertySources()
                    .addFirst(
                        new org.springframework.core.env.SystemEnvironmentPropertySource(
                            "test-systemEnvironment",
                            java.util.Map.of(
                                "KVROUTE_ADMIN_TOKEN", "0123456789abcdef",
                                "KVROUTE_INDEX_BLOCKSIZE", "32",
                                "KVROUTE_MODE", "route",
                                "KVROUTE_ENDPOINTS_1_URL", "${POD_URL:http://127.0.0.1:18009}"))))
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              KvRouteProperties p = context.getBean(KvRouteProperties.class);
              assertThat(p.settings().index().blockSize()).isEqualTo(32);
              assertThat(p.mode()).isEqualTo(KvRouteProperties.Mode.ROUTE);
              // a placeholder is resolved, here to its default
              assertThat(p.settings().endpoints().get(1).url()).isEqualTo("http://127.0.0.1:18009");
            });
  }

  @Test
  void disabledMeansNoBeans() {
    runner
        .withPropertyValues("kvroute.enabled=false", "kvroute.endpoints[1].url=http//x")
        .run(context -> assertThat(context).hasNotFailed().doesNotHaveBean(KvRouter.class));
  }

  /** A real application's start-up: the exception that stops it names the property. */
  @Test
  void aGatewayApplicationDoesNotStartWithABadProperty() {
    SpringApplication app = new SpringApplication(GatewayTestApp.class);
    app.setWebApplicationType(WebApplicationType.REACTIVE);
    assertThatThrownBy(
            () ->
                app.run(
                    "--server.port=0",
                    "--kvroute.endpoints[0].url=http://127.0.0.1:18000",
                    "--kvroute.endpoints[1].url=http//x"))
        .satisfies(
            e -> assertThat(messages(e)).contains("kvroute.endpoints[1].url: not an http(s) URL"));
  }

  /** Every message of the cause chain, one per line. */
  static String messages(Throwable t) {
    List<String> out = new ArrayList<>();
    for (Throwable x = t; x != null && out.size() < 20; x = x.getCause()) {
      out.add(String.valueOf(x.getMessage()));
    }
    return String.join("\n", out);
  }
}
