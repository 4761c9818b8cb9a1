package io.kvroute.replay.internal;

import io.kvroute.connector.Endpoint;
import io.kvroute.scoring.Picker;
import io.kvroute.scoring.SchedulingContext;
import java.util.List;

/**
 * Round robin over the candidates, ignoring scores: the {@code n}-th pick takes candidate {@code n
 * mod size}. Not thread-safe (a replay schedules from one thread).
 */
final class RoundRobinPicker implements Picker {
  private long next;

  @Override
  public String name() {
    return "round-robin-picker";
  }

  @Override
  public List<Endpoint> pick(SchedulingContext context, List<Endpoint> candidates, double[] t) {
    int i = (int) Long.remainderUnsigned(next++, candidates.size());
    return List.of(candidates.get(i));
  }
}
