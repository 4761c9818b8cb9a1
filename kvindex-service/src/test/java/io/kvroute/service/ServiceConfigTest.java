package io.kvroute.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class ServiceConfigTest {
  @TempDir Path dir;

  static ServiceConfig parse(String json) {
    return ServiceConfig.parse(json.getBytes(StandardCharsets.UTF_8), Path.of("/etc/kv"));
  }

  @Test
  void parsesEveryField() {
    ServiceConfig c =
        parse(
            """
            {"model": "m", "http": {"host": "0.0.0.0", "port": 9090, "max_body_bytes": 4096,
               "threads": 3, "max_connections": 50, "request_timeout_ms": 700,
               "idle_timeout_ms": 9000},
             "index": {"block_size": 32, "hash_seed": "s", "max_keys": 1000,
               "tier_weights": {"CPU": 0.5}},
             "events": {"ready_timeout_ms": 1500, "topic": "kv"},
             "tokenizer": {"url": "http://tok:8000", "timeout_ms": 250, "cache_entries": 8,
               "cache_max_tokens": 1000},
             "limits": {"max_tokens": 2048, "max_candidate_pods": 10},
             "pods": [{"id": "p0", "events": "tcp://10.0.0.1:5557", "replay": "tcp://10.0.0.1:5558",
                       "http": "http://10.0.0.1:8000", "capacity_blocks": 512}],
             "pods_file": "pods.json", "pods_file_poll_ms": 500}
            """);
    assertThat(c.model()).isEqualTo("m");
    assertThat(c.host()).isEqualTo("0.0.0.0");
    assertThat(c.port()).isEqualTo(9090);
    assertThat(c.maxBodyBytes()).isEqualTo(4096);
    assertThat(c.threads()).isEqualTo(3);
    assertThat(c.maxConnections()).isEqualTo(50);
    assertThat(c.requestTimeout()).isEqualTo(Duration.ofMillis(700));
    assertThat(c.idleTimeout()).isEqualTo(Duration.ofMillis(9000));
    assertThat(c.blockSize()).isEqualTo(32);
    assertThat(c.hashSeed()).isEqualTo("s");
    assertThat(c.maxKeys()).isEqualTo(1000);
    assertThat(c.tierWeights()).containsEntry("CPU", 0.5);
    assertThat(c.readyTimeout()).isEqualTo(Duration.ofMillis(1500));
    assertThat(c.topic()).isEqualTo("kv");
    assertThat(c.tokenizer().get().url()).contains(URI.create("http://tok:8000"));
    assertThat(c.tokenizer().get().timeout()).isEqualTo(Duration.ofMillis(250));
    assertThat(c.maxTokens()).isEqualTo(2048);
    assertThat(c.maxCandidatePods()).isEqualTo(10);
    ServiceConfig.PodSpec p = c.pods().get(0);
    assertThat(p.id()).isEqualTo("p0");
    assertThat(p.events()).isEqualTo("tcp://10.0.0.1:5557");
    assertThat(p.replay()).contains("tcp://10.0.0.1:5558");
    assertThat(p.http()).contains(URI.create("http://10.0.0.1:8000"));
    assertThat(p.capacityBlocks()).isEqualTo(512);
    assertThat(c.podsFile()).contains(Path.of("/etc/kv/pods.json"));
    assertThat(c.podsFilePoll()).isEqualTo(Duration.ofMillis(500));
  }

  @ParameterizedTest(name = "{0}")
  @CsvSource(
      delimiter = '|',
      value = {
        "no model | {\"pods_file\":\"p\"} | model: is required",
        "no pods | {\"model\":\"m\"} | pods or pods_file is required",
        "bad json | {\"model\": | invalid syntax (line 1)",
        "not object | [1] | must be a mapping, was a list",
        "unknown | {\"model\":\"m\",\"pods_file\":\"p\",\"htpp\":{}} | htpp: unknown key; did you mean \"http\"?",
        "unknown nested | {\"model\":\"m\",\"pods_file\":\"p\",\"http\":{\"prot\":1} } | "
            + "http.prot: unknown key; did you mean \"port\"?",
        "port range | {\"model\":\"m\",\"pods_file\":\"p\",\"http\":{\"port\":70000}} | "
            + "http.port: must be in [0, 65535], was 70000",
        "zero connections | {\"model\":\"m\",\"pods_file\":\"p\",\"http\":{\"max_connections\":0}} | "
            + "http.max_connections: must be in [1, 1000000], was 0",
        "zero request timeout | {\"model\":\"m\",\"pods_file\":\"p\",\"http\":{\"request_timeout_ms\":0}}"
            + " | http.request_timeout_ms: must be >= 1, was 0",
        "zero idle timeout | {\"model\":\"m\",\"pods_file\":\"p\",\"http\":{\"idle_timeout_ms\":0}}"
            + " | http.idle_timeout_ms: must be >= 1, was 0",
        "port type | {\"model\":\"m\",\"pods_file\":\"p\",\"http\":{\"port\":\"80\"}} | "
            + "http.port: must be an integer, was \"80\"",
        "block size | {\"model\":\"m\",\"pods_file\":\"p\",\"index\":{\"block_size\":0}} | "
            + "index.block_size: must be in [1, 4096], was 0",
        "tier weight | {\"model\":\"m\",\"pods_file\":\"p\",\"index\":{\"tier_weights\":"
            + "{\"CPU\":2}}} | index.tier_weights.CPU: must be in [0, 1]",
        "pod id | {\"model\":\"m\",\"pods\":[{\"events\":\"tcp://a:1\"}]} | pods[0].id: is required",
        "pod events | {\"model\":\"m\",\"pods\":[{\"id\":\"a\",\"events\":\"tcp://a:1\"},"
            + "{\"id\":\"b\",\"events\":\"a:1\"}]} | pods[1].events: must be a tcp:// or ipc://",
        "pod dup | {\"model\":\"m\",\"pods\":[{\"id\":\"a\",\"events\":\"tcp://a:1\"},"
            + "{\"id\":\"a\",\"events\":\"tcp://a:2\"}]} | pods[1].id: \"a\" is listed twice (also pods[0])",
        "pod http | {\"model\":\"m\",\"pods\":[{\"id\":\"a\",\"events\":\"tcp://a:1\","
            + "\"http\":\"ftp://x\"}]} | pods[0].http: not an http(s) URL: \"ftp://x\"",
        "pod field | {\"model\":\"m\",\"pods\":[{\"id\":\"a\",\"events\":\"tcp://a:1\","
            + "\"endpoint\":\"x\"}]} | pods[0].endpoint: unknown key; known: capacity_blocks, events, http, id, replay",
        "pod capacity | {\"model\":\"m\",\"pods\":[{\"id\":\"a\",\"events\":\"tcp://a:1\","
            + "\"capacity_blocks\":-1}]} | pods[0].capacity_blocks: must be >= 0",
        "tokenizer url | {\"model\":\"m\",\"pods_file\":\"p\",\"tokenizer\":{}} | "
            + "tokenizer.url: is required",
        "tokenizer timeout | {\"model\":\"m\",\"pods_file\":\"p\",\"tokenizer\":{\"url\":"
            + "\"http://t\",\"timeout_ms\":0}} | tokenizer.timeout_ms: must be > 0",
        "tokenizer pods | {\"model\":\"m\",\"pods\":[{\"id\":\"a\",\"events\":\"tcp://a:1\"}],"
            + "\"tokenizer\":{\"url\":\"pods\"}} | no pod has an http URL",
        "duplicate key | {\"model\":\"m\",\"pods_file\":\"p\",\"model\":\"n\"} | model: duplicate key (line 1)",
        "float for integer | {\"model\":\"m\",\"pods_file\":\"p\",\"http\":{\"threads\":1.5}} | "
            + "http.threads: must be an integer, was 1.5",
        "number for string | {\"model\":\"m\",\"pods_file\":\"p\",\"events\":{\"topic\":5}} | "
            + "events.topic: must be a string, was 5",
        "http publisher | {\"model\":\"m\",\"pods\":[{\"id\":\"a\",\"events\":\"http://nope\"}]} | "
            + "pods[0].events: must be a tcp:// or ipc:// endpoint such as \"tcp://10.0.0.5:5557\", was \"http://nope\"",
        "null pod | {\"model\":\"m\",\"pods\":[null]} | pods[0]: must be a mapping, was null",
        "tcp without port | {\"model\":\"m\",\"pods\":[{\"id\":\"a\",\"events\":\"tcp://host\"}]} | "
            + "pods[0].events: must be a tcp:// or ipc://",
        "bad id | {\"model\":\"m\",\"pods\":[{\"id\":\"a b\",\"events\":\"tcp://h:1\"}]} | "
            + "pods[0].id: must be 1-253 characters",
      })
  void errorsNameTheField(String name, String json, String message) {
    assertThatThrownBy(() -> parse(json))
        .isInstanceOf(ServiceConfigException.class)
        .hasMessageContaining(message);
  }

  @Test
  void loadsFromFileAndResolvesPodsFileRelativeToIt() throws Exception {
    Path cfg = dir.resolve("serve.json");
    Files.writeString(cfg, "{\"model\":\"m\",\"pods_file\":\"pods.json\"}");
    assertThat(ServiceConfig.load(cfg).podsFile()).contains(dir.resolve("pods.json"));
    assertThatThrownBy(() -> ServiceConfig.load(dir.resolve("missing.json")))
        .isInstanceOf(ServiceConfigException.class)
        .hasMessageContaining("cannot read");
  }

  @Test
  void podsFileIsReReadOnChangeAndBadVersionsKeepThePreviousPods() throws Exception {
    Path pods = dir.resolve("pods.json");
    Files.writeString(
        pods,
        "[{\"id\":\"a\",\"events\":\"tcp://127.0.0.1:1\"},"
            + "{\"id\":\"b\",\"events\":\"tcp://127.0.0.1:2\"}]");
    ServiceConfig config =
        ServiceConfig.builder()
            .model("m")
            .port(0)
            .podsFile(pods)
            .podsFilePoll(Duration.ofHours(1))
            .build();
    try (KvIndexService s = KvIndexService.builder(config).withoutEventFeed().start()) {
      assertThat(s.pods()).containsExactly("a", "b");
      ServiceApiTest.store(s.index(), "b", ServiceApiTest.tokens(32, 0), 2, "GPU");
      assertThat(s.index().pods()).contains("b");

      Files.writeString(
          pods,
          "{\"pods\":[{\"id\":\"a\",\"events\":\"tcp://127.0.0.1:1\"},"
              + "{\"id\":\"c\",\"events\":\"tcp://127.0.0.1:3\"}]}");
      Files.setLastModifiedTime(pods, FileTime.fromMillis(System.currentTimeMillis() + 5000));
      assertThat(s.reloadPodsFile()).isEmpty();
      assertThat(s.pods()).containsExactly("a", "c");
      assertThat(s.index().pods()).doesNotContain("b");

      Files.writeString(pods, "[{\"id\":\"a\",\"events\":\"nope\"}]");
      Files.setLastModifiedTime(pods, FileTime.fromMillis(System.currentTimeMillis() + 10000));
      assertThat(s.reloadPodsFile())
          .hasValueSatisfying(m -> assertThat(m).contains("[0].events: must be a tcp://"));
      assertThat(s.pods()).containsExactly("a", "c");
    }
  }

  @Test
  void invalidPodsFileAtStartFailsNamingTheFile() throws Exception {
    Path pods = dir.resolve("pods.json");
    Files.writeString(pods, "[{\"id\":\"a\"}]");
    ServiceConfig config = ServiceConfig.builder().model("m").port(0).podsFile(pods).build();
    assertThatThrownBy(() -> KvIndexService.builder(config).withoutEventFeed().start())
        .isInstanceOf(ServiceConfigException.class)
        .hasMessageContaining(pods + ": [0].events: is required");
  }
}
