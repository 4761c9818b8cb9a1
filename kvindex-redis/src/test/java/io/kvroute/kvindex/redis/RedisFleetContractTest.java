package io.kvroute.kvindex.redis;

import io.kvroute.kvindex.contract.FleetStateContract;
import io.kvroute.kvindex.fleet.FleetConfig;
import io.kvroute.kvindex.fleet.FleetState;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;

/**
 * The {@link FleetStateContract} on a real redis-server: each replica has its own client (its own
 * connections and writer thread, as separate gateway processes would).
 */
class RedisFleetContractTest extends FleetStateContract {
  static RedisServer server;
  private final List<RedisIndexClient> clients = new ArrayList<>();

  @BeforeAll
  static void start() {
    server = RedisServer.start();
  }

  @AfterAll
  static void stop() {
    if (server != null) {
      server.close();
    }
  }

  @Override
  protected FleetState join(FleetConfig config) {
    RedisIndexClient c =
        RedisIndexClient.connect(
            RedisIndexConfig.builder()
                .url(server.url())
                .commandTimeout(Duration.ofSeconds(10))
                .build());
    clients.add(c);
    // generous deadlines: the contract checks behaviour, not speed, on a loaded machine
    return c.fleet(config.toBuilder().viewTimeout(Duration.ofSeconds(10)).build());
  }

  @AfterEach
  void closeClients() {
    clients.forEach(RedisIndexClient::close);
    clients.clear();
  }
}
