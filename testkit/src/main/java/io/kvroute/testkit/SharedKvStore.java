package io.kvroute.testkit;

import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;

/**
 * A shared KV store (LMCache remote backend, shared disk) that several simulators running {@link
 * KvTransferProtocol#SHARED_STORAGE} see: producers save the hashes of their full prompt blocks,
 * and any simulator loads the longest saved prefix instead of computing it. Bounded, LRU.
 *
 * <p>Thread-safe.
 */
public final class SharedKvStore {
  private final int capacity;
  private final LinkedHashMap<Long, Boolean> blocks = new LinkedHashMap<>(64, 0.75f, true);

  private SharedKvStore(int capacity) {
    this.capacity = capacity;
  }

  /**
   * A store holding at most {@code capacityBlocks} blocks.
   *
   * @throws IllegalArgumentException if the capacity is not positive
   */
  public static SharedKvStore create(int capacityBlocks) {
    if (capacityBlocks <= 0) {
      throw new IllegalArgumentException(
          "sharedStore.capacityBlocks must be > 0, was " + capacityBlocks);
    }
    return new SharedKvStore(capacityBlocks);
  }

  /** Saves block hashes (vLLM event u64 form), evicting the least recently used beyond capacity. */
  public synchronized void save(List<Long> hashes) {
    for (Long h : hashes) {
      blocks.put(h, Boolean.TRUE);
    }
    Iterator<Long> it = blocks.keySet().iterator();
    while (blocks.size() > capacity && it.hasNext()) {
      it.next();
      it.remove();
    }
  }

  /** The number of leading {@code hashes} present in the store. */
  public synchronized int prefixLength(List<Long> hashes) {
    int n = 0;
    while (n < hashes.size() && blocks.get(hashes.get(n)) != null) {
      n++;
    }
    return n;
  }

  /** Blocks stored. */
  public synchronized int size() {
    return blocks.size();
  }

  /** Forgets everything. */
  public synchronized void clear() {
    blocks.clear();
  }
}
