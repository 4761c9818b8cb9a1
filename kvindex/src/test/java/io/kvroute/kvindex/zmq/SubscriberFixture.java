package io.kvroute.kvindex.zmq;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * The subscriber side of the loopback socket tests: a {@link RecordingSink}, a {@link
 * RecordingListener} and a meter registry for the subscribers, and what a test {@link #track}s
 * (publishers, subscribers, pods) closed after it, the last made first. A test class registers one
 * per test: {@code @RegisterExtension final SubscriberFixture fx = new SubscriberFixture();}.
 */
final class SubscriberFixture implements AfterEachCallback {
  final SimpleMeterRegistry registry = new SimpleMeterRegistry();
  final RecordingSink sink = new RecordingSink();
  final RecordingListener listener = new RecordingListener();
  private final List<AutoCloseable> closeables = new ArrayList<>();

  /** Closes {@code t} after the test. */
  <T extends AutoCloseable> T track(T t) {
    closeables.add(t);
    return t;
  }

  @Override
  public void afterEach(ExtensionContext context) throws Exception {
    for (int i = closeables.size() - 1; i >= 0; i--) {
      closeables.get(i).close();
    }
    closeables.clear();
  }

  /**
   * A subscriber into this sink, listener and registry that polls and reconnects quickly; the test
   * sets its handshake and replay timeouts.
   */
  KvEventSubscriber.Builder subscriber() {
    return KvEventSubscriber.builder()
        .sink(sink)
        .listener(listener)
        .meterRegistry(registry)
        .pollInterval(Duration.ofMillis(5))
        .reconnectInterval(Duration.ofMillis(10))
        .reconnectIntervalMax(Duration.ofMillis(50));
  }

  /**
   * The sum of the counters {@code name} with {@code tags} (every other tag's value summed; 0 if
   * none was ever incremented).
   */
  double count(String name, String... tags) {
    return registry.find(name).tags(tags).counters().stream().mapToDouble(Counter::count).sum();
  }
}
