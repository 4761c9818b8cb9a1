package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import java.util.List;

/**
 * Chooses the endpoints of a profile from the scored candidates: the first is the primary target,
 * the rest are fallbacks in order.
 *
 * <p>Implementations must be thread-safe and use {@link SchedulingContext#random()} for random
 * choices. See {@link Pickers}.
 */
public interface Picker {

  /** The instance name. */
  String name();

  /**
   * Returns at least one endpoint when {@code candidates} is not empty.
   *
   * @param totals the weighted total per candidate, same index as {@code candidates}
   */
  List<Endpoint> pick(SchedulingContext context, List<Endpoint> candidates, double[] totals);
}
