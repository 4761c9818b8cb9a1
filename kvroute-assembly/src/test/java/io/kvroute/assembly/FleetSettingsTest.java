package io.kvroute.assembly;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.config.ConfigBinder;
import io.kvroute.config.ConfigException;
import io.kvroute.kvindex.fleet.FleetConfig;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** {@code fleet} and the Redis Cluster keys of {@code index.redis}, bound by the one binder. */
class FleetSettingsTest {
  private static final ConfigBinder BINDER = ConfigBinder.create();

  @Test
  void fleetKeysBindToAFleetConfig() {
    RouterSettings s =
        BINDER.readYaml(
            "index: { backend: redis, redis: { url: \"redis://a:1,redis://b:2\", cluster: true,"
                + " podGroups: 6, replicaId: gw-1 } }\n"
                + "fleet: { name: prod, leaseTtl: 3s, speculativeTtl: 1s, speculativeStride: 4,"
                + " viewTimeout: 5ms, viewBackoff: 0s, memoryTtl: 90s }\n",
            RouterSettings.class);
    assertThat(s.index().redis().cluster()).isTrue();
    assertThat(s.index().redis().podGroups()).isEqualTo(6);
    FleetConfig c = s.fleet().config(s.index().redis().replicaId());
    assertThat(c.fleet()).isEqualTo("prod");
    assertThat(c.replicaId()).isEqualTo("gw-1");
    assertThat(c.leaseTtl()).isEqualTo(Duration.ofSeconds(3));
    assertThat(c.speculativeTtl()).isEqualTo(Duration.ofSeconds(1));
    assertThat(c.speculativeStride()).isEqualTo(4);
    assertThat(c.viewTimeout()).isEqualTo(Duration.ofMillis(5));
    assertThat(c.viewBackoff()).isZero();
    assertThat(c.memoryTtl()).isEqualTo(Duration.ofSeconds(90));
  }

  @Test
  void defaults() {
    RouterSettings s =
        BINDER.readYaml("index: { backend: redis }\nfleet: {}\n", RouterSettings.class);
    assertThat(s.index().redis().cluster()).isFalse();
    assertThat(s.index().redis().podGroups()).isEqualTo(1);
    FleetConfig c = s.fleet().config(null);
    assertThat(c.fleet()).isEqualTo("default");
    assertThat(c.leaseTtl()).isEqualTo(FleetConfig.defaults().leaseTtl());
    assertThat(RouterSettings.defaults().fleet()).isNull();
  }

  @Test
  void errorsNameTheKey() {
    assertThatThrownBy(
            () ->
                BINDER.readYaml(
                    "index: { backend: redis }\nfleet: { leaseTtl: 10ms }\n", RouterSettings.class))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("fleet.leaseTtl")
        .hasMessageContaining(">= 300ms");
    assertThatThrownBy(() -> BINDER.readYaml("fleet: { name: x }\n", RouterSettings.class))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("fleet")
        .hasMessageContaining("index.backend: redis");
    assertThatThrownBy(
            () ->
                BINDER.readYaml(
                    "index: { backend: redis, redis: { url: \"redis://a:1,redis://b:2\" } }\n",
                    RouterSettings.class))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("index.redis.url")
        .hasMessageContaining("cluster: true");
    assertThatThrownBy(
            () ->
                BINDER.readYaml(
                    "index: { backend: redis, redis: { podGroups: 0 } }\n", RouterSettings.class))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("index.redis.podGroups");
  }
}
