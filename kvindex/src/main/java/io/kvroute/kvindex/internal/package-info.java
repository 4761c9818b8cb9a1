/** Implementation of the block index. Not part of the API: may change without notice. */
package io.kvroute.kvindex.internal;
