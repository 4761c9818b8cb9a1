package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import java.util.List;

/** Helpers of the scheduler's fleet reads (see {@link Scheduler}'s "Gateway replicas"). */
final class FleetCycles {
  static final long[] NO_KEYS = new long[0];

  private FleetCycles() {}

  /** The candidates' ids, in order. */
  static List<String> ids(List<Endpoint> candidates) {
    String[] ids = new String[candidates.size()];
    for (int i = 0; i < ids.length; i++) {
      ids[i] = candidates.get(i).id();
    }
    return List.of(ids);
  }
}
