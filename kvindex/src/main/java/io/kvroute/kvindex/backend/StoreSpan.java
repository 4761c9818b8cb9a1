package io.kvroute.kvindex.backend;

import io.kvroute.kvindex.backend.PendingBlocks.Pending;
import io.kvroute.kvindex.hash.RequestKeyHasher;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * The request keys of one {@code BlockStored} event's blocks, and which index blocks each engine
 * block covers, when the engine's block size differs from the index's: an engine block may end
 * inside an index block ({@link #MID}), end on an index-block boundary ({@link #BOUNDARY}), or span
 * several index blocks ({@link #MULTI}); an index block left incomplete at the end of an event is
 * kept in {@link PendingBlocks} for the next event.
 *
 * <p>Use: {@link #begin} (checks the event, counting what it drops, resolves its parent and chains
 * the keys), then {@link #locate} for each stored engine block (or {@link #keys()} directly when
 * {@link #alignedStart()} says so), then {@link #finish()}. The in-memory index and the Redis index
 * do exactly this, so both compute the same keys from the same events.
 *
 * <p><b>Thread-safety.</b> Not thread-safe: one per thread, or guarded by the index's lock.
 */
public final class StoreSpan {
  /** The engine block ends at an index-block boundary (maps to one request key). */
  public static final byte BOUNDARY = 0;

  /** The engine block ends inside its (complete) index block: not a valid parent. */
  public static final byte MID = 1;

  /** The engine block covers several index blocks (maps to several request keys). */
  public static final byte MULTI = 2;

  private static final long GROUP_MIX = 0x9E3779B97F4A7C15L;

  /** Where an index finds the request key an engine key maps to (to resolve a parent). */
  @FunctionalInterface
  public interface Mappings {
    /**
     * The kind ({@link #BOUNDARY}, {@link #MID} or {@link #MULTI}) of {@code engineKey}'s mapping,
     * with its last request key in {@code out[0]} (unless {@link #MID}); -1 if there is none.
     */
    int find(long engineKey, long[] out);
  }

  private final RequestKeyHasher hasher;
  private final int ibs;
  private final IndexCounters counters;
  private final PendingBlocks pending;
  private final Mappings mappings;
  private final long[] found = new long[1];
  private long[] keys = new long[256];

  // the event
  private int bs;
  private int firstHashed; // engine block of the first hash (hashes are the span's last blocks)
  private int p; // pending tokens prepended
  private int total;
  private int nIdx;
  private int[] stream;
  private long parentKey;
  private long lastEngineKey;

  // the block located last
  private int from;
  private int to;
  private byte kind;

  /**
   * A span computing keys with {@code hasher} for index blocks of {@code indexBlockSize} tokens,
   * counting drops in {@code counters}, keeping partial blocks in {@code pending} and resolving
   * parents through {@code mappings}.
   */
  public StoreSpan(
      RequestKeyHasher hasher,
      int indexBlockSize,
      IndexCounters counters,
      PendingBlocks pending,
      Mappings mappings) {
    this.hasher = Objects.requireNonNull(hasher, "hasher");
    this.ibs = indexBlockSize;
    this.counters = Objects.requireNonNull(counters, "counters");
    this.pending = Objects.requireNonNull(pending, "pending");
    this.mappings = Objects.requireNonNull(mappings, "mappings");
  }

  /** The key under which an engine block hash of KV-cache group {@code group} is mapped (not 0). */
  public static long engineKey(long hash, int group) {
    long k = hash + group * GROUP_MIX;
    return k == 0 ? 1 : k;
  }

  /**
   * Starts an event of {@code blockSize}-token engine blocks whose {@code hashes} are the last
   * blocks of {@code tokens}: checks the block sizes and the density (dropped blocks counted),
   * resolves the parent (the root of {@code lora}'s chain, a pending partial block, or a mapping;
   * unknown or partial parents counted as dropped), and chains the request keys of the complete
   * index blocks ({@code extraKeys}, one tuple per block, count when the block sizes agree).
   *
   * @return the engine blocks to store: hashes {@code [0, result)}; 0 when there is nothing to do
   */
  public int begin(
      long[] hashes,
      boolean hasParent,
      long parentHash,
      int[] tokens,
      int blockSize,
      String lora,
      int group,
      List<?> extraKeys) {
    int n = hashes.length;
    int bs = blockSize;
    if (bs % ibs != 0 && ibs % bs != 0) {
      counters.dropped("block_size", n);
      counters.warnOnce(
          "block_size:" + bs,
          "engine block size " + bs + " is not a multiple or divisor of index.blockSize " + ibs);
      return 0;
    }
    int m = tokens.length / bs; // engine blocks covered by the tokens
    int hashed = Math.min(n, m);
    if (m != n || tokens.length % bs != 0) {
      counters.dropped("non_dense", Math.max(0, n - m));
    }
    if (hashed == 0) {
      return 0;
    }
    // resolve the parent
    long parent;
    int[] pend = null;
    if (!hasParent) {
      parent = hasher.root(lora);
    } else {
      long pek = engineKey(parentHash, group);
      Pending pp = pending.get(pek);
      if (pp != null) {
        parent = pp.parentKey;
        pend = pp.tokens;
      } else {
        int k = mappings.find(pek, found);
        if (k < 0) {
          counters.dropped("unknown_parent", n);
          return 0;
        }
        if (k == MID) {
          counters.dropped("partial_parent", n);
          return 0;
        }
        parent = found[0];
      }
    }
    this.bs = bs;
    this.firstHashed = m - hashed;
    this.parentKey = parent;
    this.lastEngineKey = engineKey(hashes[n - 1], group);
    p = pend == null ? 0 : pend.length;
    int spanTokens = m * bs;
    stream = tokens;
    if (p > 0) {
      stream = new int[p + spanTokens];
      System.arraycopy(pend, 0, stream, 0, p);
      System.arraycopy(tokens, 0, stream, p, spanTokens);
    }
    total = p + spanTokens;
    nIdx = total / ibs;
    if (keys.length < nIdx) {
      keys = new long[Math.max(nIdx, keys.length * 2)];
    }
    long[] rk = keys;
    boolean useExtras = extraKeys != null && ibs == bs && p == 0 && extraKeys.size() == n && n == m;
    for (int j = 0; j < nIdx; j++) {
      long extraHash = 0;
      if (useExtras) {
        extraHash = extraHash(extraKeys.get(j), lora);
      }
      parent = hasher.chain(parent, stream, j * ibs, (j + 1) * ibs, extraHash);
      rk[j] = parent;
    }
    return hashed;
  }

  private static long extraHash(Object tuple, String lora) {
    if (!(tuple instanceof List)) {
      return 0;
    }
    List<?> keys = (List<?>) tuple;
    if (lora != null && !keys.isEmpty() && lora.equals(keys.get(0))) {
      keys = keys.subList(1, keys.size());
    }
    return keys.isEmpty() ? 0 : RequestKeyHasher.extraKeysHash(keys);
  }

  /**
   * The request keys of the event's complete index blocks, in order (a shared array, longer than
   * their number).
   */
  public long[] keys() {
    return keys;
  }

  /**
   * When every engine block is one index block and nothing was pending (the common case): the index
   * block of hash 0, hash {@code i} then mapping to {@code keys()[result + i]}, a {@link
   * #BOUNDARY}; else -1.
   */
  public int alignedStart() {
    return bs == ibs && p == 0 ? firstHashed : -1;
  }

  /**
   * Locates the index blocks of hash {@code i}'s engine block: false if it completes none yet (its
   * tokens wait in a partial block), else {@link #from()}, {@link #to()} and {@link #kind()} are
   * set.
   */
  public boolean locate(int i) {
    int start = p + (firstHashed + i) * bs;
    int end = start + bs;
    from = start / ibs;
    to = Math.min((end - 1) / ibs, nIdx - 1);
    if (from > to) {
      return false;
    }
    kind = from == to ? (end % ibs == 0 ? BOUNDARY : MID) : MULTI;
    return true;
  }

  /** The first index block of the engine block located last. */
  public int from() {
    return from;
  }

  /** The last index block of the engine block located last (its mapping's request key). */
  public int to() {
    return to;
  }

  /** The mapping kind of the engine block located last. */
  public byte kind() {
    return kind;
  }

  /** Ends the event: keeps its trailing partial index block, if any, for the next event. */
  public void finish() {
    if (total % ibs != 0) {
      long base = nIdx > 0 ? keys[nIdx - 1] : parentKey;
      pending.put(lastEngineKey, new Pending(base, Arrays.copyOfRange(stream, nIdx * ibs, total)));
    }
    stream = null;
  }
}
