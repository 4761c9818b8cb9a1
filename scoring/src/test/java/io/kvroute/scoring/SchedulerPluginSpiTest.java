package io.kvroute.scoring;

import static io.kvroute.scoring.TestSupport.ep;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.config.ConfigException;
import io.kvroute.connector.Endpoint;
import io.kvroute.connector.Endpoint.Role;
import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URISyntaxException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.stream.Stream;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Scheduler plugins register by name: kvroute's own and a user's, from a jar of their own. */
class SchedulerPluginSpiTest {
  private static final String ZONE_FILTER =
      """
      package com.example.kvplugins;

      import io.kvroute.config.ConfigException;
      import io.kvroute.scoring.Filters;
      import io.kvroute.scoring.SchedulerPlugin;
      import io.kvroute.scoring.SchedulerPluginProvider;

      public final class ZoneFilterProvider
          implements SchedulerPluginProvider<ZoneFilterProvider.Params> {
        public record Params(String zone) {
          public Params {
            if (zone == null) {
              throw new ConfigException("zone", "is required");
            }
          }
        }

        @Override
        public String type() {
          return "zone-filter";
        }

        @Override
        public Class<Params> parametersType() {
          return Params.class;
        }

        @Override
        public SchedulerPlugin create(Params p, Context context) {
          return SchedulerPlugin.filter(
              Filters.simple(context.name(), e -> p.zone().equals(e.labels().get("zone"))));
        }
      }
      """;

  private static final String CONFIG =
      """
      plugins:
      - name: only-a
        type: zone-filter
        parameters: {zone: a}
      - type: queue-scorer
      """;

  /** A plugin jar as a user would ship it: its classes and a META-INF/services entry. */
  private static Path pluginJar(Path dir) throws IOException, URISyntaxException {
    Path src = dir.resolve("src/com/example/kvplugins/ZoneFilterProvider.java");
    Files.createDirectories(src.getParent());
    Files.writeString(src, ZONE_FILTER, StandardCharsets.UTF_8);
    Path classes = Files.createDirectories(dir.resolve("classes"));
    String classPath =
        String.join(
            File.pathSeparator,
            location(SchedulerPluginProvider.class),
            location(ConfigException.class),
            location(Endpoint.class));
    JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
    assertThat(javac).as("tests run on a JDK").isNotNull();
    int rc =
        javac.run(
            null,
            null,
            null,
            "-d",
            classes.toString(),
            "-classpath",
            classPath,
            "--release",
            "17",
            src.toString());
    assertThat(rc).as("plugin compiles").isZero();
    Path jar = dir.resolve("zone-filter-plugin.jar");
    try (JarOutputStream out = new JarOutputStream(Files.newOutputStream(jar));
        Stream<Path> files = Files.walk(classes)) {
      for (Path f : files.filter(Files::isRegularFile).toList()) {
        out.putNextEntry(new JarEntry(classes.relativize(f).toString().replace('\\', '/')));
        Files.copy(f, out);
        out.closeEntry();
      }
      out.putNextEntry(
          new JarEntry("META-INF/services/io.kvroute.scoring.SchedulerPluginProvider"));
      OutputStream o = out;
      o.write("com.example.kvplugins.ZoneFilterProvider\n".getBytes(StandardCharsets.UTF_8));
      out.closeEntry();
    }
    return jar;
  }

  private static String location(Class<?> c) throws URISyntaxException {
    return Path.of(c.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
  }

  @Test
  void aPluginJarOnTheClassPathIsFoundAndUsed(@TempDir Path dir) throws Exception {
    Path jar = pluginJar(dir);
    try (URLClassLoader cl =
        new URLClassLoader(new URL[] {jar.toUri().toURL()}, getClass().getClassLoader())) {
      SchedulerConfigLoader loader = SchedulerConfigLoader.builder().classLoader(cl).build();
      assertThat(loader.knownTypes()).contains("zone-filter", "queue-scorer", "decode-filter");
      Scheduler s = loader.load(CONFIG).build();
      assertThat(s.profiles().get("default").filters())
          .extracting(Filter::name)
          .containsExactly("only-a");
      Decision d =
          s.pick(
              SchedulingRequest.builder()
                  .model("m")
                  .candidates(
                      List.of(
                          ep("x", Role.DECODE, Map.of("zone", "b")),
                          ep("y", Role.DECODE, Map.of("zone", "a"))))
                  .build());
      assertThat(d.endpoints()).extracting(Endpoint::id).containsExactly("y");

      // Its parameters are bound as strictly as kvroute's own.
      assertThatThrownBy(() -> loader.load("plugins: [{type: zone-filter}]"))
          .isInstanceOf(SchedulerConfigException.class)
          .hasMessage("plugins[0].parameters.zone: is required");
      assertThatThrownBy(() -> loader.load("plugins: [{type: zone-filter, parameters: {zon: a}}]"))
          .hasMessage("plugins[0].parameters.zon: unknown key; did you mean \"zone\"? known: zone");
    }
  }

  @Test
  void withoutTheJarTheTypeIsUnknownAndTheKnownOnesAreListed() {
    SchedulerConfigLoader loader = SchedulerConfigLoader.create();
    assertThat(loader.knownTypes())
        .doesNotContain("zone-filter")
        .contains(
            "decode-filter",
            "prefill-filter",
            "role-filter",
            "label-selector-filter",
            "by-label-selector",
            "pd-pairing-filter",
            "health-filter",
            "session-affinity-filter",
            "lora-availability-filter",
            "precise-prefix-cache-scorer",
            "prefix-cache-scorer",
            "load-aware-scorer",
            "active-request-scorer",
            "queue-scorer",
            "running-requests-size-scorer",
            "kv-cache-utilization-scorer",
            "lora-affinity-scorer",
            "session-affinity-scorer",
            "no-hit-lru-scorer",
            "max-score-picker",
            "random-picker",
            "weighted-random-picker",
            "prefix-based-pd-decider",
            "always-disagg-pd-decider",
            "approx-prefix-cache-producer",
            "single-profile-handler",
            "disagg-profile-handler",
            "pd-profile-handler");
    assertThatThrownBy(() -> loader.load(CONFIG))
        .isInstanceOf(SchedulerConfigException.class)
        .hasMessage(
            "plugins[0].type: unknown plugin \"zone-filter\"; known: "
                + String.join(", ", loader.knownTypes()));
  }

  /** Parameters as the raw tree, for plugins that prefer it. */
  @SuppressWarnings("rawtypes")
  @Test
  void explicitRegistrationTakesPrecedenceAndMayTakeTheRawTree() {
    SchedulerPluginProvider<Map> everyone =
        SchedulerPluginProvider.of(
            "queue-scorer", // replaces the built-in one
            Map.class,
            (p, c) ->
                SchedulerPlugin.scorer(
                    new Scorer() {
                      @Override
                      public String name() {
                        return c.name() + "/" + p.get("flavour");
                      }

                      @Override
                      public void score(
                          SchedulingContext context, List<Endpoint> candidates, double[] out) {
                        java.util.Arrays.fill(out, 0, candidates.size(), 1.0);
                      }
                    }));
    SchedulerConfigLoader loader = SchedulerConfigLoader.builder().plugin(everyone).build();
    Scheduler s =
        loader.load("plugins: [{type: queue-scorer, parameters: {flavour: plain}}]").build();
    assertThat(s.profiles().get("default").scorers())
        .extracting(w -> w.scorer().name())
        .containsExactly("queue-scorer/plain");
    assertThatThrownBy(() -> SchedulerConfigLoader.builder().plugin(everyone).plugin(everyone))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("\"queue-scorer\"");
    assertThat(SchedulerConfigLoader.builder().discover(false).build().knownTypes()).isEmpty();
  }

  @Test
  void aPluginsSettingsReachTheScheduler() {
    SchedulerPluginProvider<SchedulerPluginProvider.NoParameters> slow =
        SchedulerPluginProvider.of(
            "slow-metrics",
            SchedulerPluginProvider.NoParameters.class,
            (p, c) ->
                SchedulerPlugin.dataProducer(b -> b.metricsStaleAfter(java.time.Duration.ZERO)));
    SchedulerConfigLoader loader = SchedulerConfigLoader.builder().plugin(slow).build();
    Scheduler.Builder b = loader.load("plugins: [{type: slow-metrics}, {type: queue-scorer}]");
    assertThatThrownBy(b::build).hasMessageContaining("metricsStaleAfter must be > 0");
  }
}
