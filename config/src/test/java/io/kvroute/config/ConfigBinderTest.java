package io.kvroute.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class ConfigBinderTest {
  /** A small configuration shaped like the gateway's. */
  record Root(
      Listen listen,
      List<Ep> endpoints,
      Map<String, Model> models,
      Duration timeout,
      Quantity memory,
      Boolean flag,
      Double weight,
      Long big) {
    Root {
      listen = listen == null ? new Listen(null, null) : listen;
      endpoints = endpoints == null ? List.of() : List.copyOf(endpoints);
      models = models == null ? Map.of() : Map.copyOf(models);
      Map<String, Integer> seen = new HashMap<>();
      for (int i = 0; i < endpoints.size(); i++) {
        Integer first = seen.putIfAbsent(endpoints.get(i).id(), i);
        if (first != null) {
          throw new ConfigException(
              "endpoints[" + i + "].id",
              "duplicate id \"" + endpoints.get(i).id() + "\" (also endpoints[" + first + "])");
        }
      }
    }
  }

  record Listen(String host, Integer port) {
    Listen {
      host = host == null ? "127.0.0.1" : host;
      port = port == null ? 8080 : port;
      if (port < 0 || port > 65535) {
        throw new ConfigException("port", "must be in [0, 65535], was " + port);
      }
    }
  }

  record Ep(String id, String url, Map<String, String> labels) {
    Ep {
      if (url == null) {
        throw new ConfigException("url", "is required");
      }
      if (!url.startsWith("http://") && !url.startsWith("https://")) {
        throw new ConfigException("url", "not an http(s) URL: \"" + url + "\"");
      }
      if (id == null) {
        throw new IllegalArgumentException("an endpoint needs an id");
      }
    }
  }

  record Model(Integer weight) {}

  private final ConfigBinder binder = ConfigBinder.create();

  @Test
  void bindsAValidDocumentWithDefaults() {
    Root r =
        binder.readYaml(
            """
            listen: {port: 9000}
            endpoints:
              - {id: a, url: "http://a:1", labels: {zone: x, "llm-d.ai/role": decode}}
            models: {llama: {weight: 2}}
            timeout: 1m30s
            memory: 32Gi
            flag: true
            weight: 1
            big: 9000000000
            """,
            Root.class);
    assertThat(r.listen()).isEqualTo(new Listen("127.0.0.1", 9000));
    assertThat(r.endpoints().get(0).labels()).containsEntry("llm-d.ai/role", "decode");
    assertThat(r.models().get("llama").weight()).isEqualTo(2);
    assertThat(r.timeout()).isEqualTo(Duration.ofSeconds(90));
    assertThat(r.memory().value()).isEqualTo(32L << 30);
    assertThat(r.weight()).isEqualTo(1.0);
    assertThat(r.big()).isEqualTo(9_000_000_000L);
    assertThat(binder.readJson("{\"timeout\": 2.5}", Root.class).timeout())
        .isEqualTo(Duration.ofMillis(2500));
  }

  @ParameterizedTest(name = "{0}")
  @CsvSource(
      delimiter = '|',
      textBlock =
          """
          unknown key with a suggestion | endpoint: [] | endpoint: unknown key; did you mean "endpoints"? known: big, endpoints, flag, listen, memory, models, timeout, weight
          unknown nested key | listen: {prot: 1} | listen.prot: unknown key; did you mean "port"? known: host, port
          unknown key in a list element | 'endpoints: [{id: a, url: "http://a", zone: b}]' | endpoints[0].zone: unknown key; known: id, labels, url
          duplicate top-level key | 'flag: true\\nflag: false' | flag: duplicate key (line 2)
          duplicate nested key | 'endpoints: [{id: a, url: "http://a", id: b}]' | endpoints[0].id: duplicate key (line 1)
          duplicate id | 'endpoints: [{id: a, url: "http://a"}, {id: a, url: "http://b"}]' | endpoints[1].id: duplicate id "a" (also endpoints[0])
          malformed URL | 'endpoints: [{id: a, url: "http://a"}, {id: b, url: "http//x"}]' | endpoints[1].url: not an http(s) URL: "http//x"
          missing field | 'endpoints: [{id: a}]' | endpoints[0].url: is required
          plain IllegalArgumentException | 'endpoints: [{url: "http://a"}]' | endpoints[0]: an endpoint needs an id
          range check | listen: {port: 70000} | listen.port: must be in [0, 65535], was 70000
          string for an integer | 'listen: {port: "80"}' | listen.port: must be an integer, was "80"
          float for an integer | listen: {port: 80.5} | listen.port: must be an integer, was 80.5
          integer out of range | listen: {port: 99999999999} | listen.port: must be an integer from -2147483648 to 2147483647, was 99999999999
          number for a string | listen: {host: 8} | listen.host: must be a string, was 8 (quote it if you mean the text)
          number for a label | 'endpoints: [{id: a, url: "http://a", labels: {zone: 1}}]' | endpoints[0].labels.zone: must be a string, was 1 (quote it if you mean the text)
          mapping for a string | 'endpoints: [{id: a, url: {x: 1}}]' | endpoints[0].url: must be a string, was a mapping
          list for a mapping | listen: [1] | listen: must be a mapping, was a list
          mapping for a list | 'endpoints: {id: a}' | endpoints: must be a list, was a mapping
          string for a mapping | listen: here | listen: must be a mapping, was "here"
          string for a boolean | 'flag: "yes please"' | flag: must be true or false, was "yes please"
          string for a number | 'weight: "1.5"' | weight: must be a number, was "1.5"
          bad duration | timeout: soon | timeout: must be a duration such as "30s", "1m30s" or "250ms", was "soon"
          duration unit | timeout: 30x | timeout: has unknown unit "x" in "30x"; use ns, us, ms, s, m or h (e.g. "30s", "1m30s")
          duration without unit | timeout: 1m30 | timeout: must be a duration such as "30s", "1m30s" or "250ms" (a unit is required after 30), was "1m30"
          duration as a list | 'timeout: [1]' | timeout: must be a duration such as "30s", "1m30s" or "250ms", was a list
          bad quantity | memory: 32Gb | memory: must be a quantity such as "32Gi", "500M" or 1048576, was "32Gb"
          fractional quantity | memory: 0.5 | memory: must be a whole number of units, was "0.5"
          two documents | 'flag: true\\n---\\nflag: false' | only one document is allowed; found more after it (line 3)
          not a mapping | '[1, 2]' | must be a mapping, was a list
          """)
  void errorsNameTheFieldAndTheProblem(String name, String yaml, String message) {
    assertThatThrownBy(() -> binder.readYaml(yaml.replace("\\n", "\n"), Root.class))
        .isInstanceOf(ConfigException.class)
        .hasMessage(message);
  }

  @Test
  void syntaxErrorsGiveTheLine() {
    assertThatThrownBy(() -> binder.readYaml("listen:\n  port: 1\nflag: true: x\n", Root.class))
        .isInstanceOf(ConfigException.class)
        .hasMessage("flag: invalid syntax (line 3): mapping values are not allowed here")
        .hasMessageNotContaining("\n");
    assertThatThrownBy(() -> binder.readJson("{\"listen\": {\"port\": }", Root.class))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("invalid syntax (line 1)")
        .hasMessageNotContaining("\n");
    assertThatThrownBy(() -> binder.readYaml("# nothing here\n", Root.class))
        .isInstanceOf(ConfigException.class)
        .hasMessage("the document is empty");
  }

  @Test
  void duplicateKeysInJsonToo() {
    assertThatThrownBy(() -> binder.readJson("{\"flag\": true, \"flag\": false}", Root.class))
        .isInstanceOf(ConfigException.class)
        .hasMessage("flag: duplicate key (line 1)");
    assertThatThrownBy(() -> binder.readYaml("models: {a: {weight: 1}, a: {weight: 2}}", Map.class))
        .isInstanceOf(ConfigException.class)
        .hasMessage("models.a: duplicate key (line 1)");
  }

  @Test
  void convertReportsUnderThePathGiven() {
    Map<?, ?> tree = binder.readYaml("port: \"80\"", Map.class);
    assertThatThrownBy(() -> binder.convert(tree, Listen.class, "plugins[2].parameters"))
        .isInstanceOf(ConfigException.class)
        .hasMessage("plugins[2].parameters.port: must be an integer, was \"80\"");
    assertThat(binder.convert(null, Listen.class, "x")).isEqualTo(new Listen("127.0.0.1", 8080));
    assertThatThrownBy(() -> binder.convert(Map.of("hots", "a"), Listen.class, "listen"))
        .isInstanceOf(ConfigException.class)
        .hasMessage("listen.hots: unknown key; did you mean \"host\"? known: host, port");
  }

  @Test
  void filesNameTheirSourceAndPickTheParserByExtension(@TempDir Path dir) throws Exception {
    Path yaml = dir.resolve("gateway.yaml");
    Files.writeString(yaml, "listen: {port: 70000}\n", StandardCharsets.UTF_8);
    assertThatThrownBy(() -> binder.read(yaml, Root.class))
        .isInstanceOf(ConfigException.class)
        .hasMessage(yaml + ": listen.port: must be in [0, 65535], was 70000")
        .satisfies(
            e -> {
              ConfigException c = (ConfigException) e;
              assertThat(c.source()).isEqualTo(yaml.toString());
              assertThat(c.path()).isEqualTo("listen.port");
              assertThat(c.problem()).isEqualTo("must be in [0, 65535], was 70000");
            });
    Path json = dir.resolve("serve.json");
    Files.writeString(json, "{\"listen\": {\"port\": 1}}", StandardCharsets.UTF_8);
    assertThat(binder.read(json, Root.class).listen().port()).isEqualTo(1);
    assertThatThrownBy(() -> binder.read(dir.resolve("missing.yaml"), Root.class))
        .isInstanceOf(ConfigException.class)
        .hasMessage(dir.resolve("missing.yaml") + ": cannot read the file: no such file");
  }

  record Snake(Integer maxBodyBytes, Listen httpListen) {}

  @Test
  void snakeCaseBinderAndKeys() {
    ConfigBinder snake = ConfigBinder.snakeCase();
    Snake s =
        snake.readJson("{\"max_body_bytes\": 5, \"http_listen\": {\"port\": 1}}", Snake.class);
    assertThat(s.maxBodyBytes()).isEqualTo(5);
    assertThatThrownBy(() -> snake.readJson("{\"maxBodyBytes\": 5}", Snake.class))
        .hasMessage(
            "maxBodyBytes: unknown key; did you mean \"max_body_bytes\"? known: http_listen,"
                + " max_body_bytes");
    assertThat(snake.keys(Snake.class))
        .containsExactly("max_body_bytes", "http_listen.host", "http_listen.port");
  }

  @Test
  void keysFollowRecordsListsAndMaps() {
    assertThat(binder.keys(Root.class))
        .containsExactly(
            "listen.host",
            "listen.port",
            "endpoints[].id",
            "endpoints[].url",
            "endpoints[].labels",
            "models.*.weight",
            "timeout",
            "memory",
            "flag",
            "weight",
            "big");
    assertThat(binder.keys(Root.class, t -> t == Listen.class))
        .startsWith("listen", "endpoints[].id");
  }

  record Options(Integer port, Boolean flag, Double weight, Duration timeout, List<String> chain) {}

  /** Command-line KEY=VALUE options read as the record's types, unknown keys as YAML scalars. */
  @Test
  void textOptionsAreReadAsTheRecordsTypes() {
    Map<String, String> text = new java.util.LinkedHashMap<>();
    text.put("port", "8998");
    text.put("flag", "true");
    text.put("weight", "0.75");
    text.put("timeout", "2s");
    text.put("chain", "nixl, http");
    text.put("other", "12");
    Map<String, Object> tree = binder.fromText(text, Options.class);
    assertThat(tree)
        .containsEntry("port", 8998)
        .containsEntry("flag", true)
        .containsEntry("timeout", "2s")
        .containsEntry("chain", List.of("nixl", "http"))
        .containsEntry("other", 12);
    tree.remove("other");
    Options o = binder.convert(tree, Options.class, "--param");
    assertThat(o.weight()).isEqualTo(0.75);
    assertThat(o.timeout()).isEqualTo(Duration.ofSeconds(2));
    assertThatThrownBy(
            () ->
                binder.convert(
                    binder.fromText(Map.of("port", "x"), Options.class), Options.class, "--param"))
        .hasMessage("--param.port: must be an integer, was \"x\"");
    assertThatThrownBy(
            () ->
                binder.convert(
                    binder.fromText(Map.of("prot", "1"), Options.class), Options.class, "--param"))
        .hasMessageContaining("did you mean \"port\"");
  }

  /** A command's file: its own section and, at the same level, a shared record's keys. */
  record Command(Listen admin, @com.fasterxml.jackson.annotation.JsonUnwrapped Root settings) {}

  @Test
  void anUnwrappedRecordsKeysSitBesideItsOwner() {
    Command c =
        binder.readYaml(
            "admin: { port: 9000 }\nendpoints: [{ id: a, url: \"http://h:1\" }]\nflag: true",
            Command.class);
    assertThat(c.admin().port()).isEqualTo(9000);
    assertThat(c.settings().endpoints()).hasSize(1);
    assertThat(c.settings().flag()).isTrue();
    assertThat(binder.keys(Command.class))
        .startsWith("admin.host", "admin.port", "listen.host", "listen.port", "endpoints[].id");
    assertThatThrownBy(() -> binder.readYaml("endpoint: []", Command.class))
        .hasMessageContaining("endpoint: unknown key; did you mean \"endpoints\"?")
        .hasMessageContaining("admin");
    assertThatThrownBy(
            () ->
                binder.readYaml(
                    "endpoints: [{ id: a, url: \"http://h:1\" }, { id: a, url: \"http://h:2\" }]",
                    Command.class))
        .hasMessage("endpoints[1].id: duplicate id \"a\" (also endpoints[0])");
    assertThatThrownBy(
            () -> binder.readYaml("endpoints: [{ id: a, url: \"ftp://h\" }]", Command.class))
        .hasMessage("endpoints[0].url: not an http(s) URL: \"ftp://h\"");
    assertThatThrownBy(() -> binder.readYaml("flag: maybe", Command.class))
        .hasMessageStartingWith("flag: ");
    assertThatThrownBy(() -> binder.readYaml("listen: { port: 70000 }", Command.class))
        .hasMessageStartingWith("listen.port: must be in [0, 65535]");
    assertThatThrownBy(() -> binder.readYaml("admin: { port: 70000 }", Command.class))
        .hasMessageStartingWith("admin.port: must be in [0, 65535]");
  }
}
