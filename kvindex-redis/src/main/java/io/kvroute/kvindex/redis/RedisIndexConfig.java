package io.kvroute.kvindex.redis;

import io.kvroute.kvindex.fleet.PodGroups;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.function.LongSupplier;

/**
 * Immutable configuration of a {@link RedisIndexClient}: where the Redis (or Valkey) server is, how
 * replicas share the writes, and the client-side bounds. Built by a validating {@link Builder}.
 *
 * <table>
 *   <caption>Options</caption>
 *   <tr><th>option</th><th>default</th><th>meaning</th></tr>
 *   <tr><td>url</td><td>redis://127.0.0.1:6379</td><td>Redis URI ({@code redis://},
 *       {@code rediss://}, with password and database as Lettuce parses them); with {@code
 *       cluster}, one or more seed nodes separated by commas</td></tr>
 *   <tr><td>cluster</td><td>false</td><td>the URL names Redis Cluster nodes: commands go to the
 *       shard of their slot, the topology is followed (failovers, resharding)</td></tr>
 *   <tr><td>clusterRefresh</td><td>5 s</td><td>with {@code cluster}, how often the topology is
 *       re-read (also on MOVED redirects and reconnections, at most once a second)</td></tr>
 *   <tr><td>podGroups</td><td>one group</td><td>pods split into groups by a hash of their id, each
 *       with its own hash tag, so one model's keys spread over a Cluster's shards; lookups fan out
 *       to the groups' shards; a replica writes only the pods of the groups it follows
 *       ({@link PodGroups})</td></tr>
 *   <tr><td>keyPrefix</td><td>kvroute</td><td>first part of every key's hash tag:
 *       {@code {keyPrefix:namespace}}</td></tr>
 *   <tr><td>ingestMode</td><td>{@link IngestMode#LEASED}</td><td>who writes a pod's events</td></tr>
 *   <tr><td>replicaId</td><td>random</td><td>this replica's name in lease tokens</td></tr>
 *   <tr><td>leaseTtl</td><td>10 s</td><td>a pod lease's time to live (renewed every third)</td></tr>
 *   <tr><td>entryTtl</td><td>6 h</td><td>time to live of a request key, refreshed by stores and
 *       by lookup hits; 0 = none (then only Redis's own maxmemory policy bounds memory)</td></tr>
 *   <tr><td>mappingTtl</td><td>6 h</td><td>time to live of an engine-key mapping, refreshed by
 *       stores (by each replica at most once per quarter of it, and whenever the request key it
 *       names was gone); 0 = none</td></tr>
 *   <tr><td>lookupMode</td><td>{@link LookupMode#PIPELINED_MGET}</td><td>how a lookup reads a
 *       prompt's keys in one round trip</td></tr>
 *   <tr><td>lookupTimeout</td><td>100 ms</td><td>a lookup slower than this answers "no cache
 *       information"</td></tr>
 *   <tr><td>commandTimeout</td><td>2 s</td><td>any other command (writes, registry)</td></tr>
 *   <tr><td>writeQueueCapacity</td><td>65,536</td><td>pending write operations (one per event)
 *       before new ones are dropped and counted</td></tr>
 *   <tr><td>writeBatch</td><td>512</td><td>operations sent per pipelined flush</td></tr>
 *   <tr><td>readYourWrites</td><td>false</td><td>lookups first wait for this replica's pending
 *       writes (tests; costs latency under ingestion)</td></tr>
 *   <tr><td>mappingCacheSize</td><td>1,048,576</td><td>engine-key → request-key mappings kept
 *       locally for resolving parents and removed blocks without a round trip (direct-mapped, 17
 *       bytes each), plus a record of the mappings this replica rewrote, so that it skips their
 *       rewrite for a quarter of {@code mappingTtl} (a quarter as many slots, 16 bytes each)</td></tr>
 *   <tr><td>meterRegistry</td><td>none</td><td>Micrometer registry for the client's
 *       {@code kvroute_kvindex_redis_*} meters</td></tr>
 * </table>
 */
public final class RedisIndexConfig {

  /** How gateway replicas that share one Redis split the writing of KV events. */
  public enum IngestMode {
    /**
     * Every replica that receives a pod's events writes them; the writes are idempotent set
     * operations, so the shared state converges to the same entries whatever the interleaving.
     * Redis does the work once per replica per event.
     */
    ALL_REPLICAS,
    /**
     * One replica at a time writes a pod's events: the holder of the pod's lease (a Redis key with
     * a time to live, renewed while the holder is alive). Writes carry the lease token and Redis
     * refuses them from anyone else (fencing). A replica that takes over a lease first replays the
     * pod's recent events it had received but not written, so nothing applied by the previous
     * holder's last moments is missed. Redis does the work once per event.
     */
    LEASED
  }

  /** How a lookup reads a whole prompt's request keys in one round trip. */
  public enum LookupMode {
    /** A Lua script reads the keys in order and stops at the first one nobody holds. */
    SCRIPT,
    /** A pipelined {@code HMGET} (pod epochs) and {@code MGET} (every key of the prompt). */
    PIPELINED_MGET
  }

  private final String url;
  private final boolean cluster;
  private final Duration clusterRefresh;
  private final PodGroups podGroups;
  private final String keyPrefix;
  private final IngestMode ingestMode;
  private final String replicaId;
  private final Duration leaseTtl;
  private final Duration entryTtl;
  private final Duration mappingTtl;
  private final LookupMode lookupMode;
  private final Duration lookupTimeout;
  private final Duration commandTimeout;
  private final int writeQueueCapacity;
  private final int writeBatch;
  private final boolean readYourWrites;
  private final int mappingCacheSize;
  private final MeterRegistry meterRegistry;
  private final LongSupplier nanoClock;

  private RedisIndexConfig(Builder b) {
    this.url = b.url;
    this.cluster = b.cluster;
    this.clusterRefresh = b.clusterRefresh;
    this.podGroups = b.podGroups;
    this.keyPrefix = b.keyPrefix;
    this.ingestMode = b.ingestMode;
    this.replicaId = b.replicaId;
    this.leaseTtl = b.leaseTtl;
    this.entryTtl = b.entryTtl;
    this.mappingTtl = b.mappingTtl;
    this.lookupMode = b.lookupMode;
    this.lookupTimeout = b.lookupTimeout;
    this.commandTimeout = b.commandTimeout;
    this.writeQueueCapacity = b.writeQueueCapacity;
    this.writeBatch = b.writeBatch;
    this.readYourWrites = b.readYourWrites;
    this.mappingCacheSize = b.mappingCacheSize;
    this.meterRegistry = b.meterRegistry;
    this.nanoClock = b.nanoClock;
  }

  /** A builder with the defaults above. */
  public static Builder builder() {
    return new Builder();
  }

  /** The Redis URI. */
  public String url() {
    return url;
  }

  /** Whether {@link #url()} names Redis Cluster nodes. */
  public boolean cluster() {
    return cluster;
  }

  /** How often a Cluster's topology is re-read. */
  public Duration clusterRefresh() {
    return clusterRefresh;
  }

  /** The pod groups (one hash tag each) and the groups this replica follows. */
  public PodGroups podGroups() {
    return podGroups;
  }

  /** First part of every key's hash tag. */
  public String keyPrefix() {
    return keyPrefix;
  }

  /** Who writes a pod's events. */
  public IngestMode ingestMode() {
    return ingestMode;
  }

  /** This replica's name. */
  public String replicaId() {
    return replicaId;
  }

  /** Lease time to live. */
  public Duration leaseTtl() {
    return leaseTtl;
  }

  /** Request-key time to live (zero: none). */
  public Duration entryTtl() {
    return entryTtl;
  }

  /** Engine-key mapping time to live (zero: none). */
  public Duration mappingTtl() {
    return mappingTtl;
  }

  /** How lookups read. */
  public LookupMode lookupMode() {
    return lookupMode;
  }

  /** Lookup deadline. */
  public Duration lookupTimeout() {
    return lookupTimeout;
  }

  /** Deadline of other commands. */
  public Duration commandTimeout() {
    return commandTimeout;
  }

  /** Pending write operations allowed. */
  public int writeQueueCapacity() {
    return writeQueueCapacity;
  }

  /** Operations per pipelined flush. */
  public int writeBatch() {
    return writeBatch;
  }

  /** Whether lookups wait for this replica's pending writes. */
  public boolean readYourWrites() {
    return readYourWrites;
  }

  /** Local engine-key mapping cache slots. */
  public int mappingCacheSize() {
    return mappingCacheSize;
  }

  /** The Micrometer registry, if any. */
  public Optional<MeterRegistry> meterRegistry() {
    return Optional.ofNullable(meterRegistry);
  }

  /** The monotonic clock (nanoseconds). */
  public LongSupplier nanoClock() {
    return nanoClock;
  }

  @Override
  public String toString() {
    // the URLs may carry a password: show their host parts only
    StringBuilder masked = new StringBuilder();
    for (String one : url.split(",")) {
      String u = one.trim();
      int at = u.lastIndexOf('@');
      int scheme = u.indexOf("://");
      if (at > 0 && scheme > 0) {
        u = u.substring(0, scheme + 3) + "***@" + u.substring(at + 1);
      }
      masked.append(masked.length() == 0 ? "" : ",").append(u);
    }
    String u = masked.toString();
    return "RedisIndexConfig{url="
        + u
        + ", cluster="
        + cluster
        + ", podGroups="
        + podGroups
        + ", keyPrefix="
        + keyPrefix
        + ", ingestMode="
        + ingestMode
        + ", replicaId="
        + replicaId
        + ", leaseTtl="
        + leaseTtl
        + ", entryTtl="
        + entryTtl
        + ", mappingTtl="
        + mappingTtl
        + ", lookupMode="
        + lookupMode
        + ", lookupTimeout="
        + lookupTimeout
        + ", commandTimeout="
        + commandTimeout
        + ", writeQueueCapacity="
        + writeQueueCapacity
        + ", writeBatch="
        + writeBatch
        + ", readYourWrites="
        + readYourWrites
        + ", mappingCacheSize="
        + mappingCacheSize
        + "}";
  }

  /** Validating builder of {@link RedisIndexConfig}; not thread-safe. */
  public static final class Builder {
    private String url = "redis://127.0.0.1:6379";
    private boolean cluster;
    private Duration clusterRefresh = Duration.ofSeconds(5);
    private PodGroups podGroups = PodGroups.single();
    private String keyPrefix = "kvroute";
    private IngestMode ingestMode = IngestMode.LEASED;
    private String replicaId =
        "replica-" + Long.toHexString(new java.security.SecureRandom().nextLong());
    private Duration leaseTtl = Duration.ofSeconds(10);
    private Duration entryTtl = Duration.ofHours(6);
    private Duration mappingTtl = Duration.ofHours(6);
    private LookupMode lookupMode = LookupMode.PIPELINED_MGET;
    private Duration lookupTimeout = Duration.ofMillis(100);
    private Duration commandTimeout = Duration.ofSeconds(2);
    private int writeQueueCapacity = 65_536;
    private int writeBatch = 512;
    private boolean readYourWrites;
    private int mappingCacheSize = 1 << 20;
    private MeterRegistry meterRegistry;
    private LongSupplier nanoClock = System::nanoTime;

    private Builder() {}

    /** Redis URI (default {@code redis://127.0.0.1:6379}). */
    public Builder url(String url) {
      this.url = Objects.requireNonNull(url, "url");
      return this;
    }

    /**
     * Whether the URL names Redis Cluster nodes (default false); several seed nodes are separated
     * by commas ({@code redis://10.0.0.1:7000,redis://10.0.0.2:7000}).
     */
    public Builder cluster(boolean cluster) {
      this.cluster = cluster;
      return this;
    }

    /** How often a Cluster's topology is re-read (default 5 s). */
    public Builder clusterRefresh(Duration period) {
      this.clusterRefresh = Objects.requireNonNull(period, "clusterRefresh");
      return this;
    }

    /**
     * Pod groups (default one): each group's keys carry their own hash tag, spread evenly over the
     * slot space, so {@code groups} a multiple of the Cluster's masters spreads a model evenly.
     * Every replica sharing an index uses the same number of groups; each may follow a different
     * subset ({@link PodGroups#followedBy}).
     */
    public Builder podGroups(PodGroups groups) {
      this.podGroups = Objects.requireNonNull(groups, "podGroups");
      return this;
    }

    /** First part of every key's hash tag (default {@code kvroute}). */
    public Builder keyPrefix(String keyPrefix) {
      this.keyPrefix = Objects.requireNonNull(keyPrefix, "keyPrefix");
      return this;
    }

    /** Who writes a pod's events (default {@link IngestMode#LEASED}). */
    public Builder ingestMode(IngestMode mode) {
      this.ingestMode = Objects.requireNonNull(mode, "ingestMode");
      return this;
    }

    /** This replica's name in lease tokens (default: random). */
    public Builder replicaId(String replicaId) {
      this.replicaId = Objects.requireNonNull(replicaId, "replicaId");
      return this;
    }

    /** Lease time to live (default 10 s). */
    public Builder leaseTtl(Duration ttl) {
      this.leaseTtl = Objects.requireNonNull(ttl, "leaseTtl");
      return this;
    }

    /** Request-key time to live (default 6 h; zero: none). */
    public Builder entryTtl(Duration ttl) {
      this.entryTtl = Objects.requireNonNull(ttl, "entryTtl");
      return this;
    }

    /** Engine-key mapping time to live (default 6 h; zero: none). */
    public Builder mappingTtl(Duration ttl) {
      this.mappingTtl = Objects.requireNonNull(ttl, "mappingTtl");
      return this;
    }

    /** How lookups read (default {@link LookupMode#PIPELINED_MGET}: measured faster). */
    public Builder lookupMode(LookupMode mode) {
      this.lookupMode = Objects.requireNonNull(mode, "lookupMode");
      return this;
    }

    /** Lookup deadline (default 100 ms). */
    public Builder lookupTimeout(Duration timeout) {
      this.lookupTimeout = Objects.requireNonNull(timeout, "lookupTimeout");
      return this;
    }

    /** Deadline of writes and registry commands (default 2 s). */
    public Builder commandTimeout(Duration timeout) {
      this.commandTimeout = Objects.requireNonNull(timeout, "commandTimeout");
      return this;
    }

    /** Pending write operations allowed (default 65,536). */
    public Builder writeQueueCapacity(int capacity) {
      this.writeQueueCapacity = capacity;
      return this;
    }

    /** Operations per pipelined flush (default 512). */
    public Builder writeBatch(int batch) {
      this.writeBatch = batch;
      return this;
    }

    /** Whether lookups first wait for this replica's pending writes (default false). */
    public Builder readYourWrites(boolean readYourWrites) {
      this.readYourWrites = readYourWrites;
      return this;
    }

    /** Local engine-key mapping cache slots (default 1,048,576; rounded up to a power of two). */
    public Builder mappingCacheSize(int size) {
      this.mappingCacheSize = size;
      return this;
    }

    /** Registers the {@code kvroute_kvindex_redis_*} meters in {@code registry}. */
    public Builder meterRegistry(MeterRegistry registry) {
      this.meterRegistry = registry;
      return this;
    }

    /** The monotonic clock in nanoseconds (default {@link System#nanoTime()}). */
    public Builder nanoClock(LongSupplier clock) {
      this.nanoClock = Objects.requireNonNull(clock, "nanoClock");
      return this;
    }

    /**
     * Builds the configuration.
     *
     * @throws IllegalArgumentException naming the first invalid field
     */
    public RedisIndexConfig build() {
      for (String one : url.split(",")) {
        String x = one.trim();
        check(
            x.startsWith("redis://") || x.startsWith("rediss://") || x.startsWith("valkey://"),
            "index.redis.url must start with redis://, rediss:// or valkey://, was " + url);
      }
      check(
          cluster || url.indexOf(',') < 0,
          "index.redis.url names several servers: set index.redis.cluster, was " + url);
      check(
          clusterRefresh.toMillis() >= 100,
          "index.redis.clusterRefresh must be >= 100ms, was " + clusterRefresh);
      check(
          !keyPrefix.isEmpty() && keyPrefix.indexOf('{') < 0 && keyPrefix.indexOf('}') < 0,
          "index.redis.keyPrefix must be non-empty and hold no braces, was \"" + keyPrefix + "\"");
      check(!replicaId.isEmpty(), "index.redis.replicaId must be non-empty");
      check(leaseTtl.toMillis() >= 100, "index.redis.leaseTtl must be >= 100ms, was " + leaseTtl);
      check(!entryTtl.isNegative(), "index.redis.entryTtl must be >= 0, was " + entryTtl);
      check(!mappingTtl.isNegative(), "index.redis.mappingTtl must be >= 0, was " + mappingTtl);
      check(
          lookupTimeout.toMillis() >= 1,
          "index.redis.lookupTimeout must be >= 1ms, was " + lookupTimeout);
      check(
          commandTimeout.toMillis() >= 1,
          "index.redis.commandTimeout must be >= 1ms, was " + commandTimeout);
      check(
          writeQueueCapacity >= 1,
          "index.redis.writeQueueCapacity must be >= 1, was " + writeQueueCapacity);
      check(
          writeBatch >= 1 && writeBatch <= 65_536,
          "index.redis.writeBatch must be in [1, 65536], was " + writeBatch);
      check(
          mappingCacheSize >= 1 && mappingCacheSize <= (1 << 28),
          "index.redis.mappingCacheSize must be in [1, 268435456], was " + mappingCacheSize);
      return new RedisIndexConfig(this);
    }

    private static void check(boolean ok, String message) {
      if (!ok) {
        throw new IllegalArgumentException(message);
      }
    }
  }
}
