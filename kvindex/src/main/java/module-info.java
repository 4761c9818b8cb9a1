/**
 * KV events (codec, ZMQ subscriber and publisher), vLLM-exact hashing and the block index. The
 * {@code internal} packages are not exported; {@code backend} is exported to kvindex-redis only.
 */
module io.kvroute.kvindex {
  requires transitive micrometer.core;
  requires transitive org.zeromq.jeromq;
  requires msgpack.core;
  requires org.slf4j;

  exports io.kvroute.kvindex;
  exports io.kvroute.kvindex.event;
  exports io.kvroute.kvindex.fleet;
  exports io.kvroute.kvindex.hash;
  exports io.kvroute.kvindex.parity;
  exports io.kvroute.kvindex.zmq;

  // What kvroute's index backends share (ingest arithmetic, counters): not API.
  exports io.kvroute.kvindex.backend to
      io.kvroute.kvindex.redis;

  // The bridge that fills a PrefixMatch without public mutators, for kvroute's own index backends.
  exports io.kvroute.kvindex.internal to
      io.kvroute.kvindex.redis;
}
