package io.kvroute.kvindex.internal;

import java.lang.invoke.VarHandle;
import java.util.Arrays;

/**
 * Open-addressing map from pod id to its dense int id, cheaper than {@code HashMap<String,
 * Integer>} on the lookup path (no boxing, no nodes; the stored hash is compared before the
 * string). Written by one thread at a time (the index's write lock): joins and removals (which move
 * entries) with the index's pods {@link Seq} odd, a clear's change of id in place ({@link
 * #replace}); read by lookups without a lock, which may read it torn and then do not validate.
 * Every change writes its log entry (and a replaced id) before it bumps the version.
 */
final class PodIds {
  /** Changes remembered ({@link #changed}): a lookup bound this many versions ago catches up. */
  static final int LOG = 1024;

  private final String[] log = new String[LOG];
  private String[] keys = new String[64];
  private int[] hashes = new int[64];
  private int[] ids = new int[64];
  private int size;
  private long version;

  int size() {
    return size;
  }

  /** Changes whenever a mapping is added, changed or removed (lookups cache resolved lists). */
  long version() {
    return version;
  }

  /**
   * The pod whose mapping changed at version {@code v} (valid while {@code version() - v < LOG}).
   */
  String changed(long v) {
    return log[(int) (v & (LOG - 1))];
  }

  private void bump(String pod) {
    log[(int) ((version + 1) & (LOG - 1))] = pod;
    VarHandle.storeStoreFence(); // the entry before the version that announces it
    version++;
  }

  /**
   * Gives the mapped {@code pod} the id {@code id} in place (a clear): one write of its id, then
   * the version (logged); a reader without the lock that reads the new version reads the new id,
   * and never a torn map. No-op if unmapped.
   */
  void replace(String pod, int id) {
    int h = pod.hashCode();
    int m = keys.length - 1;
    int i = mix(h) & m;
    while (keys[i] != null) {
      if (keys[i].equals(pod)) {
        ids[i] = id;
        log[(int) ((version + 1) & (LOG - 1))] = pod;
        VarHandle.storeStoreFence(); // the id and the entry before the version
        version++;
        return;
      }
      i = (i + 1) & m;
    }
  }

  /** The id of {@code pod}, or -1. */
  int get(String pod) {
    int h = pod.hashCode();
    String[] ks = keys;
    int m = ks.length - 1;
    int i = mix(h) & m;
    while (true) {
      String k = ks[i];
      if (k == null) {
        return -1;
      }
      if (k == pod || (hashes[i] == h && k.equals(pod))) {
        return ids[i];
      }
      i = (i + 1) & m;
    }
  }

  void put(String pod, int id) {
    if ((size + 1) * 2 > keys.length) {
      grow();
    }
    int h = pod.hashCode();
    int m = keys.length - 1;
    int i = mix(h) & m;
    while (keys[i] != null) {
      if (keys[i].equals(pod)) {
        ids[i] = id;
        bump(pod);
        return;
      }
      i = (i + 1) & m;
    }
    keys[i] = pod;
    hashes[i] = h;
    ids[i] = id;
    size++;
    bump(pod);
  }

  void remove(String pod) {
    int h = pod.hashCode();
    int m = keys.length - 1;
    int i = mix(h) & m;
    while (keys[i] != null) {
      if (keys[i].equals(pod)) {
        // backward-shift deletion (bumped after)
        int j = i;
        while (true) {
          j = (j + 1) & m;
          String k = keys[j];
          if (k == null) {
            break;
          }
          int home = mix(hashes[j]) & m;
          if (((j - home) & m) >= ((j - i) & m)) {
            keys[i] = k;
            hashes[i] = hashes[j];
            ids[i] = ids[j];
            i = j;
          }
        }
        keys[i] = null;
        size--;
        bump(pod);
        return;
      }
      i = (i + 1) & m;
    }
  }

  private void grow() {
    String[] ok = keys;
    int[] oh = hashes;
    int[] oi = ids;
    keys = new String[ok.length * 2];
    hashes = new int[ok.length * 2];
    ids = new int[ok.length * 2];
    int m = keys.length - 1;
    for (int s = 0; s < ok.length; s++) {
      if (ok[s] != null) {
        int i = mix(oh[s]) & m;
        while (keys[i] != null) {
          i = (i + 1) & m;
        }
        keys[i] = ok[s];
        hashes[i] = oh[s];
        ids[i] = oi[s];
      }
    }
  }

  /** The pod ids, in table order. */
  String[] keys() {
    return Arrays.stream(keys).filter(k -> k != null).toArray(String[]::new);
  }

  private static int mix(int h) {
    return h * 0x9E3779B9 ^ (h >>> 16);
  }
}
