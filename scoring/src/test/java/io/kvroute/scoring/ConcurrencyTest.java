package io.kvroute.scoring;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.connector.Endpoint;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class ConcurrencyTest {
  @Test
  void concurrentPicksAndHooksLeaveConsistentState() throws Exception {
    TestSupport.FakeLookup idx = new TestSupport.FakeLookup(16);
    Scheduler s =
        Scheduler.builder()
            .prefixCacheLookup(idx)
            .profile(
                Profile.builder("decode")
                    .filter(Filters.sessionAffinity("pin", SessionAffinity.sessionId()))
                    .scorer(Scorers.precisePrefixCache(), 3)
                    .scorer(Scorers.activeRequests())
                    .scorer(Scorers.noHitLru())
                    .picker(Pickers.topN(2))
                    .build())
            .build();
    List<Endpoint> c = TestSupport.eps("a", "b", "c", "d", "e");
    ExecutorService pool = Executors.newFixedThreadPool(4);
    CountDownLatch start = new CountDownLatch(1);
    List<Future<?>> fs = new ArrayList<>();
    for (int t = 0; t < 4; t++) {
      int seed = t;
      fs.add(
          pool.submit(
              () -> {
                start.await();
                for (int i = 0; i < 300; i++) {
                  SchedulingRequest r =
                      SchedulingRequest.builder()
                          .model("m")
                          .tokenIds(TestSupport.tokens(64 + (i % 7) * 16, seed * 10 + i % 5))
                          .header("x-session-id", "s" + (i % 13))
                          .candidates(c)
                          .build();
                  Decision d = s.pick(r);
                  s.onRouted(d);
                  s.onComplete(d);
                }
                return null;
              }));
    }
    start.countDown();
    for (Future<?> f : fs) {
      f.get(60, TimeUnit.SECONDS);
    }
    pool.shutdown();
    for (Endpoint e : c) {
      assertThat(s.inFlight(e.id())).isZero();
    }
  }
}
