package io.kvroute.kvindex.redis.internal;

import io.kvroute.kvindex.IndexConfig;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The storage tiers of one index: local ids in first-seen order (GPU first, as {@code PrefixMatch}
 * reports them) and their codes in Redis (fixed for common media, else a hash of the name, named in
 * {@code P tiern}).
 *
 * <p><b>Thread-safety.</b> Thread-safe: lookups by name go through a concurrent map; registration
 * is under a monitor; the name list is published through a volatile field after the arrays are
 * written.
 */
final class Tiers extends IndexPart {
  static final int MAX_TIERS = 16;
  private static final List<String> FIXED_TIERS =
      List.of("GPU", "CPU", "STORAGE", "DISK", "FS", "OBJ", "CPU_PINNED", "EXTERNAL");

  private final Object lock = new Object();
  private final String[] names = new String[MAX_TIERS];
  private final double[] weights = new double[MAX_TIERS];
  private final Map<String, Integer> ids = new ConcurrentHashMap<>();
  private final int[] codeToLocal = new int[256];
  private final int[] localToCode = new int[MAX_TIERS];
  private final Set<Integer> named = ConcurrentHashMap.newKeySet();
  private volatile List<String> nameList = List.of();
  private int count;

  Tiers(RedisIndexImpl index) {
    super(index);
    Arrays.fill(codeToLocal, -1);
    for (String medium : config.tierWeights().keySet()) {
      local(medium);
    }
  }

  /** The tier names by local id. */
  List<String> names() {
    return nameList;
  }

  /** The weight of local tier {@code t}. */
  double weight(int t) {
    return weights[t];
  }

  /** Local tier index of a medium (GPU first), registering it locally on first sight. */
  int local(String medium) {
    String m = medium == null || medium.isEmpty() ? IndexConfig.GPU : medium;
    Integer id = ids.get(m);
    if (id != null) {
      return id;
    }
    String up = m.toUpperCase(Locale.ROOT);
    synchronized (lock) {
      id = ids.get(up);
      if (id == null) {
        if (count >= MAX_TIERS) {
          counters.warnOnce(
              "tiers", "more than " + MAX_TIERS + " media; counting " + up + " as the last one");
          return MAX_TIERS - 1;
        }
        id = count++;
        names[id] = up;
        weights[id] = config.tierWeight(up);
        int code = code(up);
        localToCode[id] = code;
        codeToLocal[code] = id;
        nameList = List.copyOf(Arrays.asList(names).subList(0, id + 1));
        ids.put(up, id);
      }
      ids.put(m, id);
      return id;
    }
  }

  /** The tier's code in Redis: fixed for common media, else a hash of the name in [8, 256). */
  private static int code(String upperName) {
    int f = FIXED_TIERS.indexOf(upperName);
    if (f >= 0) {
      return f;
    }
    int h = upperName.hashCode() * 0x9E3779B9;
    return 8 + ((h >>> 8) % 248);
  }

  /** The code of a medium, naming it in Redis the first time a custom code is written. */
  int codeOf(String medium) {
    int local = local(medium);
    int code = localToCode[local];
    if (code >= FIXED_TIERS.size() && named.add(code)) {
      try {
        client.call(
            c -> c.hsetnx(keys.tiernKey, Bytes.num(code), Bytes.utf8(names[local])),
            rc.commandTimeout(),
            "write");
      } catch (RedisClientImpl.Unavailable e) {
        named.remove(code);
      }
    }
    return code;
  }

  /** Local tier of a code read from Redis (a round trip the first time a custom code is seen). */
  int localOfCode(int code) {
    int l = codeToLocal[code];
    if (l >= 0) {
      return l;
    }
    String name = null;
    if (code < FIXED_TIERS.size()) {
      name = FIXED_TIERS.get(code);
    } else {
      try {
        byte[] n =
            client.call(c -> c.hget(keys.tiernKey, Bytes.num(code)), rc.lookupTimeout(), "read");
        name = n == null ? null : Bytes.str(n);
      } catch (RedisClientImpl.Unavailable e) {
        return 0;
      }
    }
    if (name == null) {
      return 0;
    }
    return local(name);
  }
}
