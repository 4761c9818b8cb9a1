package io.kvroute.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.connector.Endpoint;
import io.kvroute.router.KvEventFeed;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Consumer;

/** A sink that keeps the endpoints and the calls it saw. */
final class RecordingSink implements EndpointSink {
  record Entry(Endpoint endpoint, KvEventFeed.Source events) {}

  private final Map<String, Entry> state = new TreeMap<>();
  private final List<String> calls = new ArrayList<>();

  @Override
  public synchronized void add(Endpoint endpoint, KvEventFeed.Source events) {
    state.put(endpoint.id(), new Entry(endpoint, events));
    calls.add("add " + endpoint.id() + " " + endpoint.baseUrl());
  }

  @Override
  public synchronized void remove(String endpointId) {
    state.remove(endpointId);
    calls.add("remove " + endpointId);
  }

  synchronized Map<String, Entry> state() {
    return new TreeMap<>(state);
  }

  synchronized List<String> calls() {
    return List.copyOf(calls);
  }

  /** Polls until the assertion holds, failing with its last error after the deadline. */
  void await(Consumer<RecordingSink> assertion) {
    await(Duration.ofSeconds(60), () -> assertion.accept(this));
  }

  static void await(Duration timeout, Runnable assertion) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (true) {
      try {
        assertion.run();
        return;
      } catch (AssertionError | NullPointerException e) {
        // NullPointerException: an entry looked up by id is briefly absent while a change
        // removes and re-adds it (an IP or a label changed).
        if (System.nanoTime() > deadline) {
          throw e;
        }
      }
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError(e);
      }
    }
  }

  void awaitIds(String... ids) {
    await(s -> assertThat(s.state().keySet()).containsExactlyInAnyOrder(ids));
  }
}
