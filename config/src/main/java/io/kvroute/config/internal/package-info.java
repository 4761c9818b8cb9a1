/** Implementation of the binder: the strict mappers, the deserializers and error translation. */
package io.kvroute.config.internal;
