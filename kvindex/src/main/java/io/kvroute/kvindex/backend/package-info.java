/**
 * Building blocks shared by kvroute's own {@link io.kvroute.kvindex.BlockIndex} backends: the
 * in-memory index and {@code kvindex-redis}. Exported by a qualified export to {@code
 * io.kvroute.kvindex.redis} only, so it is not part of the API (and not in the API dump): it may
 * change without notice, together with both backends.
 */
package io.kvroute.kvindex.backend;
