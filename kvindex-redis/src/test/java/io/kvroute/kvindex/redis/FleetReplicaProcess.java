package io.kvroute.kvindex.redis;

import io.kvroute.kvindex.fleet.FleetConfig;
import io.kvroute.kvindex.fleet.FleetState;
import java.time.Duration;

/**
 * A gateway replica in its own JVM, for tests that kill it: joins a fleet on Redis, counts {@code
 * n} requests in flight on an endpoint, waits until Redis acknowledged them, prints {@code ready}
 * and then keeps heartbeating until it is killed.
 *
 * <p>Arguments: Redis URL, fleet, replica id, lease ms, endpoint, n.
 */
public final class FleetReplicaProcess {
  private FleetReplicaProcess() {}

  /** Runs the replica until killed. */
  public static void main(String[] args) throws Exception {
    RedisIndexClient client =
        RedisIndexClient.connect(
            RedisIndexConfig.builder().url(args[0]).commandTimeout(Duration.ofSeconds(10)).build());
    FleetState fleet =
        client.fleet(
            FleetConfig.builder()
                .fleet(args[1])
                .replicaId(args[2])
                .leaseTtl(Duration.ofMillis(Long.parseLong(args[3])))
                .build());
    int n = Integer.parseInt(args[5]);
    for (int i = 0; i < n; i++) {
      fleet.requestStarted(args[4], 100);
    }
    while (!fleet.flush(Duration.ofSeconds(10))) {
      System.out.println("waiting for Redis");
    }
    System.out.println("ready");
    System.out.flush();
    Thread.currentThread().join(); // until killed
  }
}
