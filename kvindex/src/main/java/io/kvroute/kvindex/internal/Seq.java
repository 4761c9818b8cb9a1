package io.kvroute.kvindex.internal;

import java.lang.invoke.VarHandle;

/**
 * A sequence counter (a seqlock's counter without the lock): odd while a writer changes what it
 * guards, bumped again when done. A reader reads it (even) before optimistic reads and checks it
 * unchanged after them: then no change began or ended in between.
 *
 * <p>Thread-safety: {@link #open} and {@link #close} are called by one writer at a time (under the
 * index's write lock); {@link #read} by any thread.
 */
final class Seq {
  private volatile long value;
  private int depth; // nested opens (writer only)

  /** The counter (volatile read: acquire). Odd while a change is under way. */
  long read() {
    return value;
  }

  /** Starts a change (the counter turns odd); nested changes end with the outermost. */
  void open() {
    if (depth++ == 0) {
      value = value + 1;
      VarHandle.storeStoreFence(); // the writes of the change are not seen before it
    }
  }

  /** Ends a change (the counter turns even again with the outermost). */
  void close() {
    if (--depth == 0) {
      value = value + 1; // volatile write: every write before it is seen before it
    }
  }
}
