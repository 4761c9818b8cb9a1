package io.kvroute.kvindex.internal;

import java.lang.invoke.VarHandle;

/**
 * The open-addressing table under both of the index's maps ({@link InMemoryBlockIndex}'s request
 * keys, {@link EngineKeyMap}'s engine keys): nonzero {@code long} keys, each with a {@code long}
 * value beside it in one array ({@code tab[2i]} the key, 0 when the slot is empty; {@code tab[2i +
 * 1]} its value), so that a probe brings both in, and optionally one byte per slot in {@link
 * #meta}. Slots are found by linear probing from a multiply-shift home; deletion shifts later keys
 * back (no tombstones).
 *
 * <p><b>Bounds.</b> The capacity doubles from 1,024 slots up to {@code maxEntries / 0.8} (not a
 * power of two: slots are picked by multiply-shift), so a full table is at load 0.8 whatever {@code
 * maxEntries} is. When the table is full, an insert first evicts the least recently used of 8
 * randomly sampled keys (approximate LRU, like Redis), comparing the stamps the subclass keeps
 * ({@link #stamp}): a stamp is the {@link #tick} of the key's last use, ticks counting coarse runs
 * of inserts so that ages compare over about four turnovers of the table.
 *
 * <p>The lookup path reads {@link #tab} and calls {@link #find}: final, so nothing is dispatched
 * per probe.
 *
 * <p><b>Versioned slots</b> (the request-key table; not the engine-key map). The top 24 bits of a
 * slot's value are a version that lets a reader validate what it read without a lock: odd while a
 * writer changes the slot (its key, its value, or anything the value points to), bumped by two by
 * every change ({@link #open}, {@link #close}). A reader reads a slot's value before its key and,
 * after all its reads, checks that every slot it used still has the version it read (even): then
 * the slot did not change in between. Every slot keeps its own version whatever key it holds: an
 * insert, a deletion and the backward shift of a deletion each change the versions of the slots
 * they write, so a reader that found a key, or found it absent (every slot of its probe read),
 * notices any write that would change that answer. Growing the table (a new array) is announced
 * through {@link #relayout}.
 *
 * <p>Thread-safety: written by one thread at a time (the index's write lock); with versioned slots,
 * read by any thread (readers must tolerate torn reads and validate); else guarded by the index
 * lock.
 */
abstract class SampledLruTable {
  private static final int MAX_ARRAY = Integer.MAX_VALUE - 16;
  private static final int SAMPLES = 8;

  /** The lowest bit of a versioned slot's version (bits 40..63 of its value). */
  static final long VERSION_ONE = 1L << 40;

  /** The value bits below the version. */
  static final long BELOW_VERSION = VERSION_ONE - 1;

  /** Slot i: {@code tab[2i]} = key (0: empty), {@code tab[2i + 1]} = value. */
  long[] tab;

  /** Slots in {@link #tab}. */
  int cap;

  /** One byte per slot, moved with its key; {@code null} unless the subclass asked for it. */
  byte[] meta;

  /** Keys held. */
  int size;

  /** The current stamp (only its low {@code stampBits} bits are compared). */
  int tick;

  private final boolean withMeta;
  private final boolean versioned;
  private final long emptyValue;
  private final int stampMask;
  private final int maxSize;
  private final int maxCapacity;
  private final int tickLen;
  private int sinceTick;
  private long rnd;

  /**
   * A table of at most {@code maxEntries} keys whose stamps have {@code stampBits} bits (at most
   * 8); {@code emptyValue} is written into the value of a slot that empties; {@code seed} starts
   * the sampling; {@code withMeta}: keep {@link #meta}.
   */
  SampledLruTable(int maxEntries, int stampBits, long emptyValue, long seed, boolean withMeta) {
    this(maxEntries, stampBits, emptyValue, seed, withMeta, false);
  }

  /**
   * As above; {@code versioned}: slot values carry a version in their top 24 bits ({@code
   * emptyValue} and every value must leave them clear) for readers without the lock (see the class
   * comment).
   */
  SampledLruTable(
      int maxEntries,
      int stampBits,
      long emptyValue,
      long seed,
      boolean withMeta,
      boolean versioned) {
    this.versioned = versioned;
    this.maxCapacity = Math.min(maxCapacity(maxEntries), MAX_ARRAY / 2);
    this.maxSize = maxSize(maxEntries, maxCapacity);
    this.stampMask = (1 << stampBits) - 1;
    // a tick of about 4 * maxSize / 2^stampBits inserts: stamps span about four turnovers
    this.tickLen = Math.max(1, maxSize / 64 * (1 << (8 - stampBits)));
    this.emptyValue = emptyValue;
    this.rnd = seed;
    this.withMeta = withMeta;
    alloc(initialCapacity(maxCapacity));
  }

  // Sizing. Capacities double from 1024 up to a final capacity of maxEntries / 0.8.

  /** The final capacity of a table of at most {@code maxEntries} keys (load 0.8 when full). */
  static int maxCapacity(int maxEntries) {
    long cap = (long) maxEntries * 5 / 4 + 2;
    return (int) Math.max(16, Math.min(cap, MAX_ARRAY));
  }

  /** The number of keys a table of {@code maxCapacity} slots may hold (beyond, it evicts). */
  static int maxSize(int maxEntries, int maxCapacity) {
    return (int) Math.min(maxEntries, (long) maxCapacity * 4 / 5);
  }

  static int initialCapacity(int maxCapacity) {
    return Math.min(1024, maxCapacity);
  }

  static boolean needsGrowth(int size, int capacity, int maxCapacity) {
    return capacity < maxCapacity && (long) (size + 1) * 5 > (long) capacity * 4;
  }

  static int grownCapacity(int capacity, int maxCapacity) {
    return (int) Math.min(2L * capacity, maxCapacity);
  }

  /** Home slot of {@code k} in a table of {@code capacity} slots. */
  static int home(long k, int capacity) {
    long h = k * 0x9E3779B97F4A7C15L;
    return (int) (((h >>> 32) * capacity) >>> 32);
  }

  /**
   * Backward-shift deletion: may the key in {@code j}, homed at {@code home}, move to {@code i}?
   */
  static boolean mayShift(int home, int i, int j, int capacity) {
    // yes unless home is cyclically in (i, j]
    int fromHome = j - home;
    if (fromHome < 0) {
      fromHome += capacity;
    }
    int fromHole = j - i;
    if (fromHole < 0) {
      fromHole += capacity;
    }
    return fromHome >= fromHole;
  }

  private void alloc(int capacity) {
    tab = new long[2 * capacity];
    cap = capacity;
    if (withMeta) {
      meta = new byte[capacity];
    }
  }

  /** The stamp of the key in {@code slot} (its low {@code stampBits} bits count). */
  abstract int stamp(int slot);

  /** The key in {@code slot} is about to be evicted: drop what hangs on it. */
  abstract void evicting(int slot);

  /**
   * Called with {@code true} before the table is replaced by a bigger one and with {@code false}
   * once the new one is complete (readers without the lock must not trust reads across it).
   */
  void relayout(boolean begin) {}

  /** Whether the version of value {@code v} is odd (a writer is changing its slot). */
  static boolean changing(long v) {
    return (v & VERSION_ONE) != 0;
  }

  /**
   * Versioned slots: starts a change of {@code slot} (its version turns odd; nothing if it already
   * is). Every write of the change comes after this one.
   */
  final void open(int slot) {
    long v = tab[2 * slot + 1];
    if ((v & VERSION_ONE) == 0) {
      tab[2 * slot + 1] = v + VERSION_ONE;
      VarHandle.storeStoreFence();
    }
  }

  /** Versioned slots: ends a change of {@code slot} (its version turns even: two more). */
  final void close(int slot) {
    VarHandle.storeStoreFence(); // the writes of the change come before this one
    long v = tab[2 * slot + 1];
    if ((v & VERSION_ONE) != 0) {
      tab[2 * slot + 1] = v + VERSION_ONE;
    }
  }

  /** Keys held. */
  final int size() {
    return size;
  }

  /** The slot of {@code k}, or -1. */
  final int find(long k) {
    long[] t = tab;
    int c = cap;
    int i = home(k, c);
    while (true) {
      long x = t[2 * i];
      if (x == k) {
        return i;
      }
      if (x == 0) {
        return -1;
      }
      if (++i == c) {
        i = 0;
      }
    }
  }

  /** The key in {@code k}'s home slot (a load that brings the slot into cache). */
  final long peek(long k) {
    return tab[2 * home(k, cap)];
  }

  /**
   * Puts the absent key {@code k} with value {@code v}, evicting a key first when full (else
   * growing when due); returns its slot. The insert counts towards the next tick after {@code v}
   * (and any stamp the caller computed before) is taken. Versioned slots: the slot is returned open
   * (its version odd), for the caller to {@link #close} once the key's value is complete.
   */
  final int insert(long k, long v) {
    if (size >= maxSize) {
      int victim = oldest();
      if (versioned) {
        open(victim);
      }
      evicting(victim);
      deleteSlot(victim);
    } else if (needsGrowth(size, cap, maxCapacity)) {
      rehash(grownCapacity(cap, maxCapacity));
    }
    int i = emptySlot(k);
    if (versioned) { // the slot is left open: the caller closes it once its value is complete
      tab[2 * i + 1] = (v & BELOW_VERSION) | ((tab[2 * i + 1] | VERSION_ONE) & ~BELOW_VERSION);
      VarHandle.storeStoreFence();
      tab[2 * i] = k;
    } else {
      tab[2 * i] = k;
      tab[2 * i + 1] = v;
    }
    size++;
    if (++sinceTick >= tickLen) {
      sinceTick = 0;
      tick++;
    }
    return i;
  }

  /** The first empty slot from {@code k}'s home. */
  private int emptySlot(long k) {
    int i = home(k, cap);
    while (tab[2 * i] != 0) {
      if (++i == cap) {
        i = 0;
      }
    }
    return i;
  }

  /** The oldest-stamped of {@link #SAMPLES} randomly sampled keys (the table is not empty). */
  private int oldest() {
    int best = -1;
    int bestAge = -1;
    for (int n = 0; n < SAMPLES; n++) {
      rnd ^= rnd << 13;
      rnd ^= rnd >>> 7;
      rnd ^= rnd << 17;
      int i = (int) (((rnd >>> 32) * cap) >>> 32);
      while (tab[2 * i] == 0) {
        if (++i == cap) {
          i = 0;
        }
      }
      int age = (tick - stamp(i)) & stampMask;
      if (age > bestAge) {
        bestAge = age;
        best = i;
      }
    }
    return best;
  }

  /**
   * Removes the key in slot {@code i}; a later key may move into {@code i}. Versioned slots: every
   * slot written is open while it is written and closed after (the hole moving with the shift is
   * the one open slot); {@code i} may have been opened by the caller, and is closed.
   */
  final void deleteSlot(int i) {
    if (versioned) {
      deleteVersioned(i);
      return;
    }
    int j = i;
    while (true) {
      if (++j == cap) {
        j = 0;
      }
      long k = tab[2 * j];
      if (k == 0) {
        break;
      }
      if (mayShift(home(k, cap), i, j, cap)) {
        tab[2 * i] = k;
        tab[2 * i + 1] = tab[2 * j + 1];
        if (withMeta) {
          meta[i] = meta[j];
        }
        i = j;
      }
    }
    tab[2 * i] = 0;
    tab[2 * i + 1] = emptyValue;
    size--;
  }

  /** {@link #deleteSlot} with versioned slots. */
  private void deleteVersioned(int i) {
    open(i);
    int j = i;
    while (true) {
      if (++j == cap) {
        j = 0;
      }
      long k = tab[2 * j];
      if (k == 0) {
        break;
      }
      if (mayShift(home(k, cap), i, j, cap)) {
        tab[2 * i] = k; // i is open: its odd version stays
        tab[2 * i + 1] = (tab[2 * j + 1] & BELOW_VERSION) | (tab[2 * i + 1] & ~BELOW_VERSION);
        close(i);
        open(j); // the hole moves to j (a reader may still find k in j until then: same value)
        i = j;
      }
    }
    tab[2 * i] = 0;
    tab[2 * i + 1] = (emptyValue & BELOW_VERSION) | (tab[2 * i + 1] & ~BELOW_VERSION);
    close(i);
    size--;
  }

  private void rehash(int capacity) {
    if (versioned) {
      relayout(true);
    }
    long[] old = tab;
    byte[] om = meta;
    int oldCap = cap;
    alloc(capacity);
    for (int s = 0; s < oldCap; s++) {
      long k = old[2 * s];
      if (k != 0) {
        int i = emptySlot(k);
        tab[2 * i] = k;
        tab[2 * i + 1] = old[2 * s + 1];
        if (withMeta) {
          meta[i] = om[s];
        }
      }
    }
    if (versioned) {
      relayout(false);
    }
  }
}
