package io.kvroute.service.internal;

import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.IndexStats;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.hash.BlockExtraKeys;
import io.kvroute.kvindex.hash.RequestKeyHasher;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A {@link BlockIndex} that reports every write to a {@link PodTracker} before delegating, so the
 * service sees per-pod event rates without depending on the subscriber's internals. Thread-safe as
 * the delegate and the tracker are.
 */
public final class TrackingBlockIndex implements BlockIndex {
  private final BlockIndex delegate;
  private final PodTracker tracker;

  /** Wraps {@code delegate}. */
  public TrackingBlockIndex(BlockIndex delegate, PodTracker tracker) {
    this.delegate = delegate;
    this.tracker = tracker;
  }

  /** The wrapped index. */
  public BlockIndex delegate() {
    return delegate;
  }

  @Override
  public void blockStored(String podId, KvEvent.BlockStored event) {
    delegate.blockStored(podId, event);
    tracker.onEvent(podId, event.blockHashes().size(), 0);
  }

  @Override
  public void blockRemoved(String podId, KvEvent.BlockRemoved event) {
    delegate.blockRemoved(podId, event);
    tracker.onEvent(podId, 0, event.blockHashes().size());
  }

  @Override
  public void allBlocksCleared(String podId) {
    delegate.allBlocksCleared(podId);
    tracker.onEvent(podId, 0, 0);
  }

  @Override
  public void removePod(String podId) {
    delegate.removePod(podId);
  }

  @Override
  public RequestKeyHasher keyHasher() {
    return delegate.keyHasher();
  }

  @Override
  public long[] requestKeys(int[] tokens, String loraOrModelName) {
    return delegate.requestKeys(tokens, loraOrModelName);
  }

  @Override
  public long[] requestKeys(int[] tokens, BlockExtraKeys extras) {
    return delegate.requestKeys(tokens, extras);
  }

  @Override
  public PrefixMatch lookup(long[] requestKeys, Collection<String> podIds) {
    return delegate.lookup(requestKeys, podIds);
  }

  @Override
  public PrefixMatch lookup(
      long[] requestKeys, int numKeys, List<String> podIds, PrefixMatch into) {
    return delegate.lookup(requestKeys, numKeys, podIds, into);
  }

  @Override
  public Set<String> pods() {
    return delegate.pods();
  }

  @Override
  public Map<String, Long> podEntries(String podId) {
    return delegate.podEntries(podId);
  }

  @Override
  public IndexStats stats() {
    return delegate.stats();
  }

  @Override
  public IndexConfig config() {
    return delegate.config();
  }
}
