package io.kvroute.kvindex.backend;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Partial index blocks waiting for their next event, when engine blocks are smaller than index
 * blocks: engine key of an event's last block → the request key the partial block chains from and
 * its tokens so far. Bounded ({@value #MAX_ENTRIES} entries, least recently used dropped first).
 *
 * <p><b>Thread-safety.</b> Thread-safe: one monitor, not taken by reads before the first write (a
 * volatile flag).
 */
public final class PendingBlocks {
  /** The most partial blocks kept. */
  public static final int MAX_ENTRIES = 1 << 16;

  private final LinkedHashMap<Long, Pending> map =
      new LinkedHashMap<>(256, 0.75f, true) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<Long, Pending> eldest) {
          return size() > MAX_ENTRIES;
        }
      };
  private volatile boolean used; // set by the first put (entries are only ever evicted by puts)

  /** Creates an empty store. */
  public PendingBlocks() {}

  /** The partial block left by the event whose last engine key is {@code engineKey}, or null. */
  Pending get(long engineKey) {
    if (!used) {
      return null; // the common case (engine block size = index block size): no monitor taken
    }
    synchronized (this) {
      return map.get(engineKey);
    }
  }

  /** True if {@code engineKey} left a partial block (refreshing it, as {@link #get} does). */
  public boolean contains(long engineKey) {
    return get(engineKey) != null;
  }

  synchronized void put(long engineKey, Pending p) {
    map.put(engineKey, p);
    used = true;
  }

  /** A partial index block: the request key it chains from and its tokens. Immutable. */
  static final class Pending {
    final long parentKey;
    final int[] tokens;

    Pending(long parentKey, int[] tokens) {
      this.parentKey = parentKey;
      this.tokens = tokens;
    }
  }
}
