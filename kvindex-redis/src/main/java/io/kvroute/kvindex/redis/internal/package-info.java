/** Implementation of the Redis block index. Not part of the API: may change without notice. */
package io.kvroute.kvindex.redis.internal;
