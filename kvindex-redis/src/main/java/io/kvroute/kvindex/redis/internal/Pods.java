package io.kvroute.kvindex.redis.internal;

import io.kvroute.kvindex.redis.internal.Scripts.Script;
import io.lettuce.core.KeyValue;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The pod registry of one index, as this replica knows it: pod name → 24-bit id in Redis ({@code P
 * pods} / {@code P podn}, ids assigned by {@code register.lua}: a hash of the name, probed linearly
 * on collision, so every replica agrees), cached locally; names found absent are not asked again
 * for a second.
 *
 * <p><b>Thread-safety.</b> Thread-safe: concurrent maps.
 */
final class Pods extends IndexPart {
  static final int MAX_SIDE_ENTRIES = 1 << 16;
  private static final int ID_SPACE = 1 << 24;
  private static final long NEGATIVE_TTL_NANOS = 1_000_000_000L;

  private final ConcurrentHashMap<String, Integer> ids = new ConcurrentHashMap<>();
  private final ConcurrentHashMap<String, Long> unknownUntil = new ConcurrentHashMap<>();

  Pods(RedisIndexImpl index) {
    super(index);
  }

  /** The cached id of {@code pod}, or null (no round trip). */
  Integer cached(String pod) {
    return ids.get(pod);
  }

  /** The pods with a cached id. */
  Set<String> names() {
    return ids.keySet();
  }

  /** The number of pods with a cached id. */
  int size() {
    return ids.size();
  }

  /** Forgets {@code pod}'s id (it was removed). */
  void forget(String pod) {
    ids.remove(pod);
  }

  /** The pod's id in Redis; registers it if {@code create}; -1 if unknown or no room. */
  int id(String pod, boolean create) {
    Integer id = ids.get(pod);
    if (id != null) {
      return id;
    }
    if (create) {
      return register(pod);
    }
    KeyLayout keys = index.layout(pod);
    byte[] v = client.call(c -> c.hget(keys.podsKey, Bytes.utf8(pod)), rc.commandTimeout(), "read");
    if (v == null) {
      return -1;
    }
    int i = (int) Bytes.parseLong(v);
    ids.put(pod, i);
    return i;
  }

  /** Registers {@code pod} (again): its id, or -1 if {@code maxPods} are registered. */
  int register(String pod) {
    ids.remove(pod);
    KeyLayout keys = index.layout(pod);
    long preferred = preferredId(pod);
    List<Object> r =
        client.call(
            c ->
                client.scripts.call(
                    c,
                    Script.REGISTER,
                    ScriptOutputType.MULTI,
                    new byte[][] {keys.podsKey},
                    keys.prefix,
                    Bytes.utf8(pod),
                    Bytes.num(preferred),
                    Bytes.num(ID_SPACE),
                    Bytes.num(config.maxPods())),
            rc.commandTimeout(),
            "write");
    int id = (int) Bytes.parseLong(r.get(0));
    if (id < 0) {
      counters.warnOnce(
          "max_pods", "index.maxPods (" + config.maxPods() + ") reached; dropping events");
      return -1;
    }
    ids.put(pod, id);
    return id;
  }

  private static long preferredId(String pod) {
    long h = 0xcbf29ce484222325L;
    for (int i = 0; i < pod.length(); i++) {
      h = (h ^ pod.charAt(i)) * 0x100000001b3L;
    }
    h ^= h >>> 29;
    h *= 0xBF58476D1CE4E5B9L;
    return (h >>> 40) & (ID_SPACE - 1);
  }

  /**
   * Names never seen: one read (HMGET) per group for all of them, the groups' reads in flight
   * together, then cached; misses for a second. A group whose shard does not answer is left
   * unresolved (its pods match nothing this time).
   */
  void resolveUnknown(List<String> pods) {
    long now = now();
    List<List<String>> byGroup = null;
    for (String p : pods) {
      if (ids.containsKey(p)) {
        continue;
      }
      Long until = unknownUntil.get(p);
      if (until != null && now < until) {
        continue;
      }
      if (byGroup == null) {
        byGroup = new ArrayList<>();
        for (int g = 0; g < index.layouts.length; g++) {
          byGroup.add(null);
        }
      }
      int g = index.groups.group(p);
      if (byGroup.get(g) == null) {
        byGroup.set(g, new ArrayList<>());
      }
      byGroup.get(g).add(p);
    }
    if (byGroup == null) {
      return;
    }
    RedisClusterAsyncCommands<byte[], byte[]> c = client.reads();
    if (c == null) {
      client.health.failed("lookup", null);
      throw new RedisClientImpl.Unavailable(null);
    }
    List<RedisFuture<List<KeyValue<byte[], byte[]>>>> futures = new ArrayList<>();
    for (int g = 0; g < byGroup.size(); g++) {
      List<String> unknown = byGroup.get(g);
      if (unknown == null) {
        futures.add(null);
        continue;
      }
      byte[][] fields = new byte[unknown.size()][];
      for (int i = 0; i < fields.length; i++) {
        fields[i] = Bytes.utf8(unknown.get(i));
      }
      futures.add(c.hmget(index.layouts[g].podsKey, fields));
    }
    if (unknownUntil.size() > MAX_SIDE_ENTRIES) {
      unknownUntil.clear();
    }
    long deadline = now + rc.lookupTimeout().toNanos();
    RedisClientImpl.Unavailable failed = null;
    int answered = 0;
    for (int g = 0; g < byGroup.size(); g++) {
      List<String> unknown = byGroup.get(g);
      if (unknown == null) {
        continue;
      }
      List<KeyValue<byte[], byte[]>> r;
      try {
        r =
            client.await(
                futures.get(g),
                java.time.Duration.ofNanos(Math.max(1, deadline - now())),
                "lookup");
      } catch (RedisClientImpl.Unavailable e) {
        failed = e;
        continue;
      }
      answered++;
      for (int i = 0; i < unknown.size(); i++) {
        KeyValue<byte[], byte[]> kv = r.get(i);
        if (kv.hasValue()) {
          ids.put(unknown.get(i), (int) Bytes.parseLong(kv.getValue()));
          unknownUntil.remove(unknown.get(i));
        } else {
          unknownUntil.put(unknown.get(i), now + NEGATIVE_TTL_NANOS);
        }
      }
    }
    if (answered == 0 && failed != null) {
      throw failed;
    }
  }
}
