package io.kvroute.kvindex.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/** The test server refuses to pass off another process's redis-server as its own. */
class RedisServerTest {
  @Test
  void aPortServedByAnotherRedisIsRefused() {
    try (RedisServer first = RedisServer.start()) {
      assertThat(first.ping()).isTrue();
      assertThatThrownBy(() -> RedisServer.start(first.port()))
          .isInstanceOf(RedisServer.PortTakenException.class)
          .hasMessageContaining("another redis-server");
      assertThat(first.ping()).isTrue();
      try (RedisServer second = RedisServer.start()) {
        assertThat(second.port()).isNotEqualTo(first.port());
      }
    }
  }
}
