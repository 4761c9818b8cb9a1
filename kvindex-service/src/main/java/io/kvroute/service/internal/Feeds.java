package io.kvroute.service.internal;

import io.kvroute.service.KvIndexService;
import java.util.function.LongSupplier;

/** Factories of the service's {@link EventFeed}s. */
public final class Feeds {
  private Feeds() {}

  /** The ZMQ feed following every pod's publisher into the service's index. */
  public static EventFeed zmq(KvIndexService service, LongSupplier nanoClock) {
    return new ZmqEventFeed(
        service.index(), service.config().topic(), service.meterRegistry(), nanoClock);
  }
}
