/**
 * A {@link io.kvroute.kvindex.BlockIndex} on Redis or Valkey ({@link
 * io.kvroute.kvindex.redis.RedisBlockIndex}), shared by gateway replicas; Lettuce underneath, no
 * Lettuce type in the API.
 */
module io.kvroute.kvindex.redis {
  requires transitive io.kvroute.kvindex;
  requires transitive micrometer.core;
  requires lettuce.core;
  requires org.slf4j;

  exports io.kvroute.kvindex.redis;
}
