package io.kvroute.connector;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Flow;

/**
 * A response that reports a prefill leg's usage ({@link StreamingResponse#withPrefillUsage}) and is
 * otherwise its delegate. Thread-safe as its delegate is.
 */
final class PrefillReported implements StreamingResponse {
  private final StreamingResponse delegate;
  private final EngineUsage usage;

  PrefillReported(StreamingResponse delegate, EngineUsage usage) {
    this.delegate = delegate;
    this.usage = usage;
  }

  @Override
  public int status() {
    return delegate.status();
  }

  @Override
  public Map<String, List<String>> headers() {
    return delegate.headers();
  }

  @Override
  public void cancel() {
    delegate.cancel();
  }

  @Override
  public Optional<EngineUsage> prefillUsage() {
    return Optional.of(usage);
  }

  @Override
  public void subscribe(Flow.Subscriber<? super ByteBuffer> subscriber) {
    delegate.subscribe(subscriber);
  }
}
