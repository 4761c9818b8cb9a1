package io.kvroute.kvindex.hybrid;

import io.kvroute.kvindex.hybrid.GroupSpec.Kind;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A pod's KV-cache groups as its events described them, arranged the way vLLM's {@code
 * HybridKVCacheCoordinator} looks them up: groups with the same spec merged into one spec group (a
 * block hits only if every member group holds it), full-attention spec groups first, the hit
 * alignment the least common multiple of the group block sizes (vLLM's {@code
 * scheduler_block_size}). Lengths are in index blocks.
 *
 * <p>Immutable; thread-safe.
 */
final class Layout {
  /** Separates a pod id from a group number in the id a group's entries are kept under. */
  static final char SEP = '\u001f';

  /** One spec group: kind, index blocks per group block, window, and the member ids. */
  static final class Spec {
    final GroupSpec spec;
    final Kind kind;
    final int k; // index blocks per group block
    final int needed; // sliding window: contiguous group blocks a hit needs
    final List<String> members;
    final int[] groups; // member group numbers

    Spec(GroupSpec spec, int indexBlockSize, List<String> members, int[] groups) {
      this.spec = spec;
      this.kind = spec.kind();
      int bs = spec.blockSize();
      this.k = bs >= indexBlockSize && bs % indexBlockSize == 0 ? bs / indexBlockSize : 1;
      // vLLM: cdiv(sliding_window - 1, block_size); a run of 0 still needs one hit to be "found"
      this.needed =
          kind == Kind.SLIDING_WINDOW ? Math.max(1, ceilDiv(spec.slidingWindow() - 1, bs)) : 0;
      this.members = List.copyOf(members);
      this.groups = groups;
    }
  }

  final String podId;
  final GroupSpec[] groups; // by group number; null: not described yet
  final String[] ids; // by group number: the pod id (group 0) or a derived id
  final Spec[] specs; // full attention first, then by first group number
  final int align; // index blocks
  final boolean simple; // one full-attention spec group and one other: one pass suffices
  final boolean hybrid; // more than one spec group, or one that is not full attention
  final String fullId; // the first full-attention member's id, or null

  private Layout(String podId, GroupSpec[] groups, int indexBlockSize) {
    this.podId = podId;
    this.groups = groups;
    this.ids = new String[groups.length];
    for (int g = 0; g < groups.length; g++) {
      ids[g] = groupId(podId, g);
    }
    Map<GroupSpec, List<Integer>> bySpec = new LinkedHashMap<>();
    for (int g = 0; g < groups.length; g++) {
      if (groups[g] != null) {
        bySpec.computeIfAbsent(groups[g], s -> new ArrayList<>()).add(g);
      }
    }
    List<Spec> list = new ArrayList<>();
    bySpec.forEach(
        (s, gs) -> {
          List<String> m = new ArrayList<>();
          for (int g : gs) {
            m.add(ids[g]);
          }
          list.add(
              new Spec(s, indexBlockSize, m, gs.stream().mapToInt(Integer::intValue).toArray()));
        });
    // stable: full attention first (vLLM sorts by "not full attention")
    list.sort(
        (a, b) -> Boolean.compare(a.kind != Kind.FULL_ATTENTION, b.kind != Kind.FULL_ATTENTION));
    this.specs = list.toArray(new Spec[0]);
    int a = 1;
    for (Spec s : specs) {
      a = lcm(a, s.k);
    }
    this.align = a;
    this.simple = specs.length == 2 && specs[0].kind == Kind.FULL_ATTENTION;
    this.hybrid = specs.length > 1 || (specs.length == 1 && specs[0].kind != Kind.FULL_ATTENTION);
    String full = null;
    for (Spec s : specs) {
      if (s.kind == Kind.FULL_ATTENTION) {
        full = s.members.get(0);
        break;
      }
    }
    this.fullId = full;
  }

  /** A layout of the given groups (by group number; null entries: absent groups). */
  static Layout of(String podId, GroupSpec[] groups, int indexBlockSize) {
    return new Layout(podId, groups.clone(), indexBlockSize);
  }

  /** A layout of one described group. */
  static Layout of(String podId, int group, GroupSpec spec, int indexBlockSize) {
    GroupSpec[] gs = new GroupSpec[group + 1];
    gs[group] = spec;
    return new Layout(podId, gs, indexBlockSize);
  }

  /** This layout with {@code group} described as {@code spec}. */
  Layout with(int group, GroupSpec spec, int indexBlockSize) {
    GroupSpec[] gs = Arrays.copyOf(groups, Math.max(groups.length, group + 1));
    gs[group] = spec;
    return new Layout(podId, gs, indexBlockSize);
  }

  /** The spec of {@code group}, or null. */
  GroupSpec spec(int group) {
    return group < groups.length ? groups[group] : null;
  }

  /** The id {@code group}'s entries are kept under. */
  String id(int group) {
    return group < ids.length ? ids[group] : groupId(podId, group);
  }

  /** The id group {@code group} of {@code podId} is kept under (group 0: the pod id itself). */
  static String groupId(String podId, int group) {
    return group == 0 ? podId : podId + SEP + "g" + group;
  }

  /** Whether {@code id} is a derived group id (not a pod). */
  static boolean isGroupId(String id) {
    return id.indexOf(SEP) >= 0;
  }

  static int ceilDiv(int a, int b) {
    return a <= 0 ? 0 : (a + b - 1) / b;
  }

  private static int lcm(int a, int b) {
    int x = a;
    int y = b;
    while (y != 0) {
      int t = x % y;
      x = y;
      y = t;
    }
    return a / x * b;
  }
}
