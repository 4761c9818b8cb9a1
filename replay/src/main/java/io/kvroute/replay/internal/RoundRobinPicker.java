package io.kvroute.replay.internal;

import io.kvroute.connector.Endpoint;
import io.kvroute.scoring.Picker;
import io.kvroute.scoring.SchedulingContext;
import java.util.List;

/**
 * Round robin over the candidates, ignoring scores: the {@code n}-th pick takes candidate {@code n
 * mod size}. Thread-safe (one atomic counter), as pickers must be.
 */
final class RoundRobinPicker implements Picker {
  private final java.util.concurrent.atomic.AtomicLong next =
      new java.util.concurrent.atomic.AtomicLong();

  @Override
  public String name() {
    return "round-robin-picker";
  }

  @Override
  public List<Endpoint> pick(SchedulingContext context, List<Endpoint> candidates, double[] t) {
    int i = (int) Long.remainderUnsigned(next.getAndIncrement(), candidates.size());
    return List.of(candidates.get(i));
  }
}
