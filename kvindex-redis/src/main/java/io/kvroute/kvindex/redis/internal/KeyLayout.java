package io.kvroute.kvindex.redis.internal;

import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.redis.RedisIndexConfig;
import io.lettuce.core.cluster.SlotHash;

/**
 * The keys of one index namespace's pod group (all under one hash tag, so in one Cluster slot) and
 * the fixed arguments of its write script. With one group the tag is {@code {keyPrefix:namespace}};
 * with G groups, group g's tag is {@code {keyPrefix:namespace:g:s}} with the smallest {@code s}
 * whose slot falls in the g-th of G equal slices of the slot space, so groups spread evenly over a
 * Cluster whose masters own equal slot ranges (as {@code redis-cli --cluster create} assigns them).
 * The layout and the reasons for it: the module's README. Immutable.
 */
final class KeyLayout {
  private static final int SLOTS = 16384;

  final int group;
  final String tag;
  final byte[] prefix; // {tag}:
  final byte[] rPrefix;
  final byte[] ePrefix;
  final byte[] podsKey;
  final byte[] podnKey;
  final byte[] epochKey;
  final byte[] statsKey;
  final byte[] tiernKey;
  final byte[] entryTtl;
  final byte[] mappingTtl;
  final byte[] maxEntries;

  KeyLayout(RedisIndexConfig rc, IndexConfig config, String namespace, int group, int groups) {
    this.group = group;
    this.tag = tag(rc.keyPrefix() + ":" + namespace, group, groups);
    String p = "{" + tag + "}:";
    this.prefix = Bytes.utf8(p);
    this.rPrefix = Bytes.utf8(p + "r:");
    this.ePrefix = Bytes.utf8(p + "e:");
    this.podsKey = Bytes.utf8(p + "pods");
    this.podnKey = Bytes.utf8(p + "podn");
    this.epochKey = Bytes.utf8(p + "epoch");
    this.statsKey = Bytes.utf8(p + "stats");
    this.tiernKey = Bytes.utf8(p + "tiern");
    this.entryTtl = Bytes.num(rc.entryTtl().toMillis());
    this.mappingTtl = Bytes.num(rc.mappingTtl().toMillis());
    this.maxEntries = Bytes.num(config.maxPodsPerKey());
  }

  /** The hash tag of group {@code group} of {@code groups} under {@code base}. */
  static String tag(String base, int group, int groups) {
    if (groups == 1) {
      return base;
    }
    int lo = (int) ((long) group * SLOTS / groups);
    int hi = (int) ((long) (group + 1) * SLOTS / groups);
    for (int s = 0; ; s++) {
      String t = base + ":" + group + ":" + s;
      int slot = SlotHash.getSlot(Bytes.utf8(t));
      if (slot >= lo && slot < hi) {
        return t;
      }
    }
  }

  /** The Cluster slot of this group's keys. */
  int slot() {
    return SlotHash.getSlot(Bytes.utf8(tag));
  }

  /** A request key's entries. */
  byte[] request(long requestKey) {
    return Bytes.key(rPrefix, requestKey);
  }

  /** An engine key's mapping. */
  byte[] engine(long engineKey) {
    return Bytes.key(ePrefix, engineKey);
  }

  /** A pod's lease (under {@code LEASED}). */
  byte[] lease(int pod) {
    return Bytes.concat(prefix, Bytes.utf8("lease:" + pod));
  }

  /** A pod's entry counts by tier code. */
  byte[] counts(int pod) {
    return Bytes.concat(prefix, Bytes.utf8("c:" + pod));
  }
}
