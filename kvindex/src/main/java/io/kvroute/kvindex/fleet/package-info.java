/**
 * State that the gateway replicas of one fleet share so that R replicas route as well as one:
 * in-flight requests and tokens per endpoint (with leases: a dead replica leaks nothing), and
 * speculative prefix entries ({@link io.kvroute.kvindex.fleet.FleetState}); the in-process store
 * with a modelled staleness ({@link io.kvroute.kvindex.fleet.InMemoryFleet}); and how pods are
 * split into groups that replicas follow ({@link io.kvroute.kvindex.fleet.PodGroups}).
 *
 * <p>It lives in kvindex because every module that needs it may depend on kvindex: the Redis
 * implementation ({@code kvindex-redis → kvindex}), the scorers ({@code scoring → kvindex}) and the
 * router ({@code router → kvindex}); none of them may depend on kvindex-redis.
 */
package io.kvroute.kvindex.fleet;
