package io.kvroute.kvindex.hybrid;

import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.IndexStats;
import io.kvroute.kvindex.PrefixMatch;
import io.kvroute.kvindex.event.KvEvent;
import io.kvroute.kvindex.hash.RequestKeyHasher;
import io.kvroute.kvindex.internal.MatchWriter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link BlockIndex} for hybrid-attention models: it keeps each KV-cache group of a pod apart and
 * scores a pod by the prefix vLLM's hybrid cache coordinator would actually reuse, not by the
 * longest prefix any one group holds.
 *
 * <p><b>Groups.</b> vLLM sends one {@code BlockStored} per KV-cache group, with {@code group_idx},
 * {@code kv_cache_spec_kind} and {@code kv_cache_spec_sliding_window}. This index learns each pod's
 * groups from them ({@link #groups(String)}) and keeps a group's entries in the wrapped index under
 * a key namespace of its own: group 0 under the pod's id, group {@code g > 0} under a derived pod
 * id (the pod id, {@code U+001F}, {@code g<g>}), never listed by {@link #pods()}. Events of groups
 * above 0 reach the wrapped index with {@code group_idx} 0: vLLM's block hashes do not depend on
 * the group, so a mamba or sliding-window block resolves its parent through any group that stored
 * it (vLLM names as parent the request's previous block, which those groups often never cached).
 *
 * <p><b>Matching.</b> A pod is <em>hybrid</em> when its events describe more than one group spec,
 * or one that is not full attention. For it, {@link #lookup} applies vLLM's rule ({@code
 * HybridKVCacheCoordinator.find_longest_cache_hit}): full attention needs every block of the
 * prefix, a sliding-window group only the blocks inside its window before the prefix's end, a mamba
 * group the state at the prefix's end; the length is lowered until every group accepts it, aligned
 * to the groups' block sizes. Groups with the same (kind, block size, window) are one spec group (a
 * block counts only if all hold it), as in vLLM. Not modelled: EAGLE's last-block drop, context
 * parallelism, mamba's fine-grained partial hits, and vLLM's cap of one token below the prompt
 * length (the rule runs over the keys given). A hybrid pod's score is the tier-weighted score of
 * its first full-attention group over the matched blocks, or the GPU weight per block when it has
 * no full-attention group. Other pods get the wrapped index's answer unchanged, and while no pod is
 * hybrid a lookup is the wrapped index's lookup (one field read more).
 *
 * <p><b>Cost.</b> Group 0's run comes from the plain lookup of the request; a hybrid pod then costs
 * the wrapped index one window probe per sliding-window candidate end (each block read at most once
 * per pass: the scan skips past a missing block) and one block per mamba candidate end (up to the
 * full-attention hit); the score usually needs no further lookup. Probes count in the wrapped
 * index's {@code lookups}. 100 gpt-oss-style pods: about 5.6 times the plain lookup of their group
 * 0 ({@code benchmarks/run.sh --only hybrid}). Each group adds its entries to the wrapped index
 * (bounded by its {@code maxKeys}, {@code maxPodsPerKey}) and a derived pod (bounded by its {@code
 * maxPods}).
 *
 * <p><b>Bounds and metrics.</b> Layouts are kept for at most {@link #MAX_GROUPS} groups per pod and
 * for the wrapped index's {@code maxPods} pods; events of groups at or above the bound go to the
 * pod's group 0 as before (counted, warned once). Meters ({@code docs/metrics.md}): {@code
 * kvroute.kvindex.hybrid.pods} (pods with a hybrid layout), {@code kvroute.kvindex.hybrid.lookups}
 * (pods matched by the hybrid rule), {@code kvroute.kvindex.hybrid.dropped} (events routed to group
 * 0 because a bound was reached).
 *
 * <p><b>Thread-safety.</b> Thread-safe as the wrapped index is. A pod's events come in order from
 * one thread (the subscriber's contract), so its layout has one writer; layouts are immutable and
 * published through a concurrent map that lookups read.
 */
public final class HybridBlockIndex implements BlockIndex {
  /** Groups per pod kept apart; events of groups at or above go to group 0. */
  public static final int MAX_GROUPS = 64;

  private static final Logger LOG = LoggerFactory.getLogger(HybridBlockIndex.class);

  private final BlockIndex index;
  private final int indexBlockSize;
  private final int maxLayouts;
  private final ConcurrentHashMap<String, Layout> layouts = new ConcurrentHashMap<>();
  private volatile boolean anyHybrid;
  private final MatchWriter writer = MatchWriter.get();
  private final ThreadLocal<Scratch> scratch = ThreadLocal.withInitial(Scratch::new);
  private final LongAdder hybridLookups = new LongAdder();
  private final LongAdder dropped = new LongAdder();
  private final Set<String> warned = ConcurrentHashMap.newKeySet();

  private HybridBlockIndex(BlockIndex index) {
    this.index = Objects.requireNonNull(index, "index");
    this.indexBlockSize = index.config().blockSize();
    this.maxLayouts = index.config().maxPods();
    index.config().meterRegistry().ifPresent(this::bindMeters);
  }

  /**
   * The hybrid layer over {@code index} (which then must only be fed through this layer). Meters
   * are bound to the index configuration's registry, if any.
   */
  public static HybridBlockIndex wrap(BlockIndex index) {
    return new HybridBlockIndex(index);
  }

  /** The hybrid layer over {@link BlockIndex#inMemory(IndexConfig) an in-memory index}. */
  public static HybridBlockIndex inMemory(IndexConfig config) {
    return wrap(BlockIndex.inMemory(config));
  }

  /** The wrapped index (it holds derived pod ids for groups above 0). */
  public BlockIndex delegate() {
    return index;
  }

  /**
   * The groups {@code podId}'s events described, by group number (groups not described yet are
   * absent); empty when the pod sent only plain full-attention events of group 0.
   */
  public Map<Integer, GroupSpec> groups(String podId) {
    Layout l = layouts.get(podId);
    if (l == null) {
      return Map.of();
    }
    Map<Integer, GroupSpec> out = new java.util.TreeMap<>();
    for (int g = 0; g < l.groups.length; g++) {
      if (l.groups[g] != null) {
        out.put(g, l.groups[g]);
      }
    }
    return Collections.unmodifiableMap(out);
  }

  /** Whether {@code podId} is matched by the hybrid rule (see the class comment). */
  public boolean isHybrid(String podId) {
    Layout l = layouts.get(podId);
    return l != null && l.hybrid;
  }

  private void bindMeters(MeterRegistry r) {
    Gauge.builder("kvroute.kvindex.hybrid.pods", this, h -> h.hybridPods())
        .description("Pods whose KV events describe a hybrid-attention layout")
        .register(r);
    FunctionCounter.builder("kvroute.kvindex.hybrid.lookups", hybridLookups, LongAdder::doubleValue)
        .description("Pods matched by vLLM's hybrid prefix rule")
        .register(r);
    FunctionCounter.builder("kvroute.kvindex.hybrid.dropped", dropped, LongAdder::doubleValue)
        .description("Events of a group kept with group 0 because a bound was reached")
        .register(r);
  }

  private double hybridPods() {
    int n = 0;
    for (Layout l : layouts.values()) {
      if (l.hybrid) {
        n++;
      }
    }
    return n;
  }

  // ------------------------------------------------------------------ write path

  @Override
  public void blockStored(String podId, KvEvent.BlockStored event) {
    Objects.requireNonNull(podId, "podId");
    Integer gi = event.groupIdx();
    int g = gi == null ? 0 : gi;
    String kind = event.kvCacheSpecKind();
    boolean plain = g == 0 && (kind == null || kind.equals("full_attention"));
    if (plain && layouts.isEmpty()) {
      index.blockStored(podId, event); // the non-hybrid fast path
      return;
    }
    if (g < 0 || g >= MAX_GROUPS) {
      bound("groups", "group_idx " + g + " of pod " + podId + " is at or above " + MAX_GROUPS);
      index.blockStored(podId, event);
      return;
    }
    Layout l = learn(podId, g, event);
    if (g == 0 || l == null) {
      index.blockStored(podId, event);
    } else {
      index.blockStored(l.id(g), event.toBuilder().groupIdx(0).build());
    }
  }

  /** Records {@code event}'s spec for {@code (podId, g)}; the pod's layout, or null if none. */
  private Layout learn(String podId, int g, KvEvent.BlockStored event) {
    Layout l = layouts.get(podId);
    int bs = event.blockSize();
    if (bs < 1) {
      return l; // token-less offload event: says nothing of the spec
    }
    GroupSpec have = l == null ? null : l.spec(g);
    if (have != null
        && have.sameAs(event.kvCacheSpecKind(), event.kvCacheSpecSlidingWindow(), bs)) {
      return l;
    }
    if (l == null && g == 0 && GroupSpec.of(event).kind() == GroupSpec.Kind.FULL_ATTENTION) {
      return null; // plain group 0 of a pod not known to be hybrid: nothing to keep
    }
    if (l == null && layouts.size() >= maxLayouts) {
      bound("pods", "more than " + maxLayouts + " pods with KV-cache groups");
      return null;
    }
    GroupSpec spec = GroupSpec.of(event);
    Layout next =
        l == null ? Layout.of(podId, g, spec, indexBlockSize) : l.with(g, spec, indexBlockSize);
    if (next.spec(0) == null && g != 0) {
      // group 0 sent plain events before this pod was known to be hybrid: full attention of the
      // same block size until its events say otherwise
      next = next.with(0, GroupSpec.fullAttention(bs), indexBlockSize);
    }
    layouts.put(podId, next);
    if (next.hybrid) {
      anyHybrid = true;
    }
    return next;
  }

  private void bound(String key, String message) {
    dropped.increment();
    if (warned.add(key)) {
      LOG.warn("kvindex hybrid: {}; such events are kept with group 0", message);
    }
  }

  @Override
  public void blockRemoved(String podId, KvEvent.BlockRemoved event) {
    Objects.requireNonNull(podId, "podId");
    Integer gi = event.groupIdx();
    int g = gi == null ? 0 : gi;
    if (g == 0 || g < 0 || g >= MAX_GROUPS) {
      index.blockRemoved(podId, event);
      return;
    }
    Layout l = layouts.get(podId);
    if (l == null) {
      index.blockRemoved(podId, event); // a group never described: as the wrapped index would
      return;
    }
    index.blockRemoved(l.id(g), event.toBuilder().groupIdx(0).build());
  }

  @Override
  public void allBlocksCleared(String podId) {
    Objects.requireNonNull(podId, "podId");
    index.allBlocksCleared(podId);
    Layout l = layouts.get(podId);
    if (l != null) {
      for (int g = 1; g < l.groups.length; g++) {
        index.allBlocksCleared(l.id(g));
      }
    }
  }

  @Override
  public void removePod(String podId) {
    Objects.requireNonNull(podId, "podId");
    index.removePod(podId);
    Layout l = layouts.remove(podId);
    if (l != null) {
      for (int g = 1; g < l.groups.length; g++) {
        index.removePod(l.id(g));
      }
    }
  }

  // ------------------------------------------------------------------ read path

  @Override
  public RequestKeyHasher keyHasher() {
    return index.keyHasher();
  }

  @Override
  public PrefixMatch lookup(
      long[] requestKeys, int numKeys, List<String> podIds, PrefixMatch into) {
    PrefixMatch m = index.lookup(requestKeys, numKeys, podIds, into);
    if (!anyHybrid) {
      return m;
    }
    int n = m.size();
    Scratch s = null;
    for (int i = 0; i < n; i++) {
      Layout l = layouts.get(podIds.get(i));
      if (l == null || !l.hybrid) {
        continue;
      }
      if (s == null) {
        s = scratch.get();
      }
      hybridLookups.increment();
      s.bind(l, requestKeys);
      int[] prefix = s.prefix(l.specs.length);
      int plain = writer.matched(m, i); // group 0's run from the first block, already looked up
      for (int j = 0; j < l.specs.length; j++) {
        prefix[j] = l.specs[j].members.size() == 1 && l.specs[j].groups[0] == 0 ? plain : -1;
      }
      int hit = HybridRule.match(l, numKeys, s, prefix);
      write(m, i, l, requestKeys, hit, plain, s);
    }
    return m;
  }

  /**
   * Writes pod {@code i}'s hybrid hit into {@code m}, with its score and tier counts ({@code
   * plain}: the group-0 run {@code m} holds for it).
   */
  private void write(PrefixMatch m, int i, Layout l, long[] keys, int hit, int plain, Scratch s) {
    List<String> tiers = m.tierNames();
    boolean groupZeroFull = l.podId.equals(l.fullId);
    if (groupZeroFull && hit == plain) {
      return; // group 0 is the full-attention group scored: m already says it all
    }
    double score;
    int gpu = tiers.indexOf(IndexConfig.GPU);
    if (groupZeroFull && hit < plain && gpu >= 0 && writer.tierBlocks(m, i, gpu) == plain) {
      // every block of group 0's run is best held on GPU: the first hit blocks too
      score = hit * index.config().tierWeight(IndexConfig.GPU);
      s.tierCounts(tiers.size())[gpu] = hit;
    } else if (hit == 0) {
      score = 0;
      s.tierCounts(tiers.size());
    } else if (l.fullId != null) {
      PrefixMatch f = index.lookup(keys, hit, s.one(l.fullId), s.probeMatch);
      score = f.score(0);
      int[] tc = s.tierCounts(tiers.size());
      for (int t = 0; t < tiers.size() && t < f.tierNames().size(); t++) {
        tc[t] = f.blocksOnTier(0, t);
      }
    } else {
      score = hit * index.config().tierWeight(IndexConfig.GPU);
      int[] tc = s.tierCounts(tiers.size());
      if (gpu >= 0) {
        tc[gpu] = hit;
      }
    }
    writer.set(m, i, m.podId(i), hit, score);
    int[] tc = s.tierCounts;
    for (int t = 0; t < tiers.size(); t++) {
      int old = writer.tierBlocks(m, i, t);
      if (old != tc[t]) {
        writer.addTierBlocks(m, i, t, tc[t] - old);
      }
    }
  }

  /** Per-thread probe state: the keys of the request, a segment buffer, a reusable result. */
  private final class Scratch implements HybridRule.Probe {
    final PrefixMatch probeMatch = new PrefixMatch();
    long[] segment = new long[64];
    int[] prefix = new int[4];
    int[] tierCounts = new int[4];
    private final ArrayList<String> oneId = new ArrayList<>(List.of(""));
    private Layout layout;
    private long[] keys;

    void bind(Layout l, long[] requestKeys) {
      this.layout = l;
      this.keys = requestKeys;
    }

    int[] prefix(int n) {
      if (prefix.length < n) {
        prefix = new int[n];
      }
      return prefix;
    }

    int[] tierCounts(int n) {
      if (tierCounts.length < n) {
        tierCounts = new int[n];
      }
      java.util.Arrays.fill(tierCounts, 0);
      return tierCounts;
    }

    List<String> one(String id) {
      oneId.set(0, id);
      return oneId;
    }

    @Override
    public int run(int spec, int from, int len) {
      if (len <= 0) {
        return 0;
      }
      long[] k;
      if (from == 0) {
        k = keys;
      } else {
        if (segment.length < len) {
          segment = new long[Math.max(len, segment.length * 2)];
        }
        System.arraycopy(keys, from, segment, 0, len);
        k = segment;
      }
      List<String> members = layout.specs[spec].members;
      PrefixMatch r = index.lookup(k, len, members, probeMatch);
      int run = len;
      for (int j = 0; j < r.size(); j++) {
        run = Math.min(run, r.matchedBlocks(j));
      }
      return run;
    }
  }

  // ------------------------------------------------------------------ introspection

  @Override
  public Set<String> pods() {
    Set<String> all = index.pods();
    Set<String> out = new LinkedHashSet<>();
    for (String p : all) {
      if (!Layout.isGroupId(p)) {
        out.add(p);
      }
    }
    return Collections.unmodifiableSet(out);
  }

  /** Entries of {@code podId} by tier name, summed over its groups (empty if unknown). */
  @Override
  public Map<String, Long> podEntries(String podId) {
    Layout l = layouts.get(podId);
    if (l == null) {
      return index.podEntries(podId);
    }
    Map<String, Long> out = new HashMap<>(index.podEntries(podId));
    for (int g = 1; g < l.groups.length; g++) {
      index.podEntries(l.id(g)).forEach((t, n) -> out.merge(t, n, Long::sum));
    }
    return Collections.unmodifiableMap(out);
  }

  /** The wrapped index's statistics, with {@code pods} counting pods, not groups. */
  @Override
  public IndexStats stats() {
    IndexStats s = index.stats();
    if (layouts.isEmpty()) {
      return s;
    }
    return IndexStats.builder()
        .keys(s.keys())
        .entries(s.entries())
        .engineKeys(s.engineKeys())
        .pods(pods().size())
        .events(s.events())
        .evictions(s.evictions())
        .dropped(s.dropped())
        .lookups(s.lookups())
        .build();
  }

  @Override
  public IndexConfig config() {
    return index.config();
  }

  @Override
  public String toString() {
    return "HybridBlockIndex[" + index + ", hybridPods=" + (long) hybridPods() + "]";
  }

  /** Pods with a layout (for tests). */
  Optional<Layout> layout(String podId) {
    return Optional.ofNullable(layouts.get(podId));
  }
}
