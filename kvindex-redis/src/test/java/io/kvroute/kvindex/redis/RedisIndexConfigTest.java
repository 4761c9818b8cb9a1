package io.kvroute.kvindex.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.kvindex.fleet.PodGroups;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The Cluster options of {@link RedisIndexConfig}: validation naming the field, masked URLs. */
class RedisIndexConfigTest {

  @Test
  void severalSeedsNeedClusterModeAndPasswordsAreMasked() {
    assertThatThrownBy(() -> RedisIndexConfig.builder().url("redis://a:1,redis://b:2").build())
        .hasMessageContaining("index.redis.cluster");
    assertThatThrownBy(
            () -> RedisIndexConfig.builder().cluster(true).url("redis://a:1,http://b:2").build())
        .hasMessageContaining("index.redis.url");
    assertThatThrownBy(
            () -> RedisIndexConfig.builder().clusterRefresh(Duration.ofMillis(10)).build())
        .hasMessageContaining("index.redis.clusterRefresh");
    RedisIndexConfig c =
        RedisIndexConfig.builder()
            .cluster(true)
            .url("redis://:secret@a:1, redis://user:other@b:2")
            .podGroups(PodGroups.of(6).followedBy(0, 3, 2))
            .build();
    assertThat(c.toString())
        .doesNotContain("secret")
        .doesNotContain("other")
        .contains("redis://***@a:1,redis://***@b:2")
        .contains("PodGroups{groups=6, following=[0, 2, 3, 5]}");
    assertThat(c.cluster()).isTrue();
    assertThat(c.podGroups().groups()).isEqualTo(6);
  }
}
