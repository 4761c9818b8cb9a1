/**
 * {@code kvroute replay}: traces through a simulated vLLM fleet in virtual time, routed by
 * kvroute's own {@code Scheduler}, {@code BlockIndex} and KV-event codec.
 */
module io.kvroute.replay {
  requires transitive io.kvroute.testkit;
  requires transitive io.kvroute.scoring;
  requires transitive io.kvroute.kvindex;
  requires transitive io.kvroute.router;
  requires com.fasterxml.jackson.databind;

  exports io.kvroute.replay;
}
