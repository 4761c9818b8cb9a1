package io.kvroute.kvindex.redis.internal;

import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.redis.RedisIndexConfig;

/**
 * The keys of one index namespace (all under the hash tag {@code {keyPrefix:namespace}}, so in one
 * Cluster slot) and the fixed arguments of its write script. The layout and the reasons for it: the
 * module's README. Immutable.
 */
final class KeyLayout {
  final byte[] prefix; // {keyPrefix:namespace}:
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

  KeyLayout(RedisIndexConfig rc, IndexConfig config, String namespace) {
    String p = "{" + rc.keyPrefix() + ":" + namespace + "}:";
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
