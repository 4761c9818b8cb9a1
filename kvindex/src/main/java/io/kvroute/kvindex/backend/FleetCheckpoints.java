package io.kvroute.kvindex.backend;

import java.nio.charset.StandardCharsets;

/**
 * The arithmetic of speculative checkpoints, shared by every {@link
 * io.kvroute.kvindex.fleet.FleetState} implementation so that they answer alike.
 *
 * <p>A request with request keys {@code k[0..n)} sent to endpoint E writes one entry at each
 * checkpoint position {@code q = 0, s, 2s, ... < n} (s the stride), stored under the key {@code
 * k[q]}: (E, its tail position {@code t = min(n - 1, q + s - 1)}, the key {@code k[t]}). Request
 * keys are chained (each covers the whole prefix before it), so an entry under {@code k[q]} proves
 * that E was sent the prefix {@code k[0..q]}; a later request {@code k'} that has the same key at
 * {@code t} was sent the prefix up to {@code t} too. The blocks a later request finds held at E are
 * then {@code t + 1} if {@code k'[t] == k[t]}, else {@code q + 1}, maximised over the entries of
 * its own checkpoints. With {@code s = 1} this is exact; with larger strides a prompt that diverges
 * inside a stride is matched to the stride's start (at most {@code s - 1} blocks short), and a
 * prompt that contains the earlier one (the next turn of a conversation) exactly.
 *
 * <p>Stateless.
 */
public final class FleetCheckpoints {
  private FleetCheckpoints() {}

  /** The number of checkpoints of a request of {@code n} keys. */
  public static int count(int n, int stride) {
    return n <= 0 ? 0 : (n + stride - 1) / stride;
  }

  /** The position of checkpoint {@code c}. */
  public static int position(int c, int stride) {
    return c * stride;
  }

  /** The tail position of the checkpoint at {@code q} in a request of {@code n} keys. */
  public static int tail(int q, int n, int stride) {
    return Math.min(n - 1, q + stride - 1);
  }

  /**
   * Blocks of {@code keys[0..n)} held according to an entry found under {@code keys[q]} whose tail
   * is ({@code tailPos}, {@code tailKey}).
   */
  public static int held(long[] keys, int n, int q, int tailPos, long tailKey) {
    if (tailPos > q && tailPos < n && keys[tailPos] == tailKey) {
      return tailPos + 1;
    }
    return q + 1;
  }

  /** A 64-bit hash of an endpoint id (its identity in the shared store's entries). */
  public static long endpointHash(String endpointId) {
    byte[] b = endpointId.getBytes(StandardCharsets.UTF_8);
    long h = 0xcbf29ce484222325L;
    for (byte x : b) {
      h = (h ^ (x & 0xff)) * 0x100000001b3L;
    }
    h ^= h >>> 33;
    h *= 0xff51afd7ed558ccdL;
    h ^= h >>> 33;
    h *= 0xc4ceb9fe1a85ec53L;
    h ^= h >>> 33;
    return h;
  }
}
