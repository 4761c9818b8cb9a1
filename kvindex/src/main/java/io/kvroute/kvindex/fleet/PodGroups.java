package io.kvroute.kvindex.fleet;

import io.kvroute.kvindex.backend.FleetCheckpoints;
import java.util.Collections;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;

/**
 * Pods split into groups by a hash of the pod id, and the groups one gateway replica follows.
 *
 * <p>A shared index spreads one model over a Redis Cluster by giving each group its own hash tag
 * (so its own slot, and the groups over the shards); a lookup fans out to the groups of the
 * candidate pods. A replica then needs to subscribe to, and write, only the pods of the groups it
 * follows: with R replicas and c copies per group ({@link #followedBy}), each pod's events reach c
 * replicas instead of R, and under leased ingestion one of them writes them.
 *
 * <p>The group of a pod is {@code unsigned(hash64(utf8(podId))) mod groups}, the hash being FNV-1a
 * with a 64-bit finaliser; every replica computes the same. Immutable.
 */
public final class PodGroups {
  private final int groups;
  private final Set<Integer> followed; // null: all
  private final boolean[] follows;

  private PodGroups(int groups, Set<Integer> followed) {
    this.groups = groups;
    this.followed = followed;
    this.follows = new boolean[groups];
    for (int g = 0; g < groups; g++) {
      follows[g] = followed == null || followed.contains(g);
    }
  }

  /**
   * {@code groups} groups, all followed.
   *
   * @throws IllegalArgumentException unless {@code 1 <= groups <= 1024}
   */
  public static PodGroups of(int groups) {
    if (groups < 1 || groups > 1024) {
      throw new IllegalArgumentException("podGroups.groups must be in [1, 1024], was " + groups);
    }
    return new PodGroups(groups, null);
  }

  /** One group holding every pod (the layout of a single shard). */
  public static PodGroups single() {
    return of(1);
  }

  /**
   * The groups replica {@code replicaIndex} of {@code replicas} follows when each group is followed
   * by {@code copies} replicas: group g by replicas {@code g mod R}, ..., {@code (g + c - 1) mod
   * R}.
   *
   * @throws IllegalArgumentException unless {@code 0 <= replicaIndex < replicas} and {@code 1 <=
   *     copies <= replicas}
   */
  public PodGroups followedBy(int replicaIndex, int replicas, int copies) {
    if (replicas < 1 || replicaIndex < 0 || replicaIndex >= replicas) {
      throw new IllegalArgumentException(
          "podGroups: replica index must be in [0, " + replicas + "), was " + replicaIndex);
    }
    if (copies < 1 || copies > replicas) {
      throw new IllegalArgumentException(
          "podGroups.copies must be in [1, " + replicas + "], was " + copies);
    }
    Set<Integer> mine = new TreeSet<>();
    for (int g = 0; g < groups; g++) {
      if (Math.floorMod(replicaIndex - g, replicas) < copies) {
        mine.add(g);
      }
    }
    return following(mine);
  }

  /**
   * The same groups, of which this replica follows {@code groupsFollowed}.
   *
   * @throws IllegalArgumentException if a group is out of range
   */
  public PodGroups following(Set<Integer> groupsFollowed) {
    Set<Integer> s = new TreeSet<>(Objects.requireNonNull(groupsFollowed, "groupsFollowed"));
    for (int g : s) {
      if (g < 0 || g >= groups) {
        throw new IllegalArgumentException(
            "podGroups: followed group " + g + " is not in [0, " + groups + ")");
      }
    }
    return new PodGroups(groups, s.size() == groups ? null : Collections.unmodifiableSet(s));
  }

  /** The number of groups. */
  public int groups() {
    return groups;
  }

  /** The group of {@code podId}. */
  public int group(String podId) {
    if (groups == 1) {
      return 0;
    }
    return (int) Long.remainderUnsigned(FleetCheckpoints.endpointHash(podId), groups);
  }

  /** Whether this replica follows group {@code group}. */
  public boolean followsGroup(int group) {
    return group >= 0 && group < groups && follows[group];
  }

  /** Whether this replica follows {@code podId}: subscribe to its events and write them. */
  public boolean follows(String podId) {
    return follows[group(podId)];
  }

  /** Whether every group is followed. */
  public boolean followsAll() {
    return followed == null;
  }

  /** The groups followed. */
  public Set<Integer> followed() {
    if (followed != null) {
      return followed;
    }
    Set<Integer> all = new TreeSet<>();
    for (int g = 0; g < groups; g++) {
      all.add(g);
    }
    return Collections.unmodifiableSet(all);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof PodGroups p && p.groups == groups && Objects.equals(p.followed, followed);
  }

  @Override
  public int hashCode() {
    return groups * 31 + Objects.hashCode(followed);
  }

  @Override
  public String toString() {
    return "PodGroups{groups=" + groups + (followed == null ? "" : ", following=" + followed) + "}";
  }
}
