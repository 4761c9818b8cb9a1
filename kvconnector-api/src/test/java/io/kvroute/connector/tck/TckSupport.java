package io.kvroute.connector.tck;

import io.kvroute.connector.FlowRelay;
import io.kvroute.connector.StreamingResponse;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Flow;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.reactivestreams.tck.TestEnvironment;

/**
 * Fixtures shared by the Reactive Streams TCK tests of kvroute's publishers (this module's
 * test-jar).
 */
public final class TckSupport {
  private TckSupport() {}

  /** The most elements a TCK test asks a publisher for (bodies are finite). */
  public static final long MAX_ELEMENTS = 1024;

  /**
   * How long the TCK's rule 3.13 test waits after a cancel before it runs the GC and checks that
   * the publisher dropped its subscriber (the TCK's default, 300 ms, is shorter than a cancel
   * running on another thread takes on a fully loaded 2-core machine: seen failing at load 30).
   */
  public static final long GC_TIMEOUT_MILLIS = 1_000;

  /**
   * A TCK environment with generous timeouts: the machine running the build may be fully loaded,
   * and a timeout here only bounds how long a failing test waits.
   */
  public static TestEnvironment environment() {
    return new TestEnvironment(10_000, 100, 10);
  }

  /** One small distinct chunk. */
  public static ByteBuffer chunk(long i) {
    return ByteBuffer.wrap(("c" + i + ";").getBytes(java.nio.charset.StandardCharsets.UTF_8))
        .asReadOnlyBuffer();
  }

  /** A 200 response whose body is exactly {@code n} chunks, served on demand. */
  public static StreamingResponse response(long n) {
    FlowRelay<ByteBuffer> relay = FlowRelay.create();
    relay.onSubscribe(new Generator(n, relay));
    return of(relay);
  }

  /** A 200 response whose body fails at once with {@code error}. */
  public static StreamingResponse failing(Throwable error) {
    FlowRelay<ByteBuffer> relay = FlowRelay.create();
    relay.onError(error);
    return of(relay);
  }

  /** {@code n} chunks in a list. */
  public static List<ByteBuffer> chunks(long n) {
    List<ByteBuffer> out = new ArrayList<>();
    for (long i = 0; i < n; i++) {
      out.add(chunk(i));
    }
    return out;
  }

  private static StreamingResponse of(FlowRelay<ByteBuffer> body) {
    return StreamingResponse.relayed(StreamingResponse.of(200, Map.of(), new byte[0]), body);
  }

  /**
   * An upstream {@link Flow.Subscription} that emits {@code n} chunks into a subscriber as they are
   * requested, on the requesting thread, without recursion (requests made while emitting are served
   * by the running loop).
   */
  public static final class Generator implements Flow.Subscription {
    private final long n;
    private final Flow.Subscriber<? super ByteBuffer> target;
    private final AtomicLong requested = new AtomicLong();
    private final AtomicInteger wip = new AtomicInteger();
    private long emitted;
    private volatile boolean cancelled;

    /** A generator of {@code n} chunks into {@code target}. */
    public Generator(long n, Flow.Subscriber<? super ByteBuffer> target) {
      this.n = n;
      this.target = target;
    }

    @Override
    public void request(long k) {
      requested.accumulateAndGet(k, (a, b) -> a + b < 0 ? Long.MAX_VALUE : a + b);
      if (wip.getAndIncrement() != 0) {
        return;
      }
      int missed = 1;
      while (true) {
        while (!cancelled && emitted < n && requested.get() > 0) {
          requested.decrementAndGet();
          target.onNext(chunk(emitted++));
        }
        if (!cancelled && emitted == n) {
          cancelled = true;
          target.onComplete();
        }
        missed = wip.addAndGet(-missed);
        if (missed == 0) {
          return;
        }
      }
    }

    @Override
    public void cancel() {
      cancelled = true;
    }
  }
}
