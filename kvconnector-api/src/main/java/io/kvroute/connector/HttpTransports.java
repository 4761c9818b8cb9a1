package io.kvroute.connector;

import java.util.Iterator;
import java.util.Objects;
import java.util.ServiceLoader;

/**
 * Finds the default {@link HttpTransport} for components built without one.
 *
 * <p>A gateway that cares about its HTTP stack passes its own transport to every component ({@code
 * KvRouter.builder().transport(t)}, {@code Tokenizers.vllm().transport(t)}, ...). Components left
 * without one use {@link #shared()}: a process-wide transport created on first use from the first
 * {@link HttpTransportProvider} found by {@link ServiceLoader} — the OkHttp transport when {@code
 * io.kvroute:kvconnector-http} is on the class path or module path.
 *
 * <p>Thread-safe.
 */
public final class HttpTransports {
  private HttpTransports() {}

  /** Holds the shared transport; created on first use (class initialisation is thread-safe). */
  private static final class Shared {
    static final HttpTransport INSTANCE = discover(HttpTransports.class.getClassLoader());
  }

  /**
   * The process-wide default transport. It is never closed (its threads are daemons and its idle
   * connections time out), so components using it must not close it.
   *
   * @throws IllegalStateException naming the artifact to add when no provider is found
   */
  public static HttpTransport shared() {
    return Shared.INSTANCE;
  }

  /**
   * A new transport from the first {@link HttpTransportProvider} that {@link ServiceLoader} finds
   * on {@code classLoader}; the caller owns (and closes) it.
   *
   * @throws IllegalStateException naming the artifact to add when no provider is found
   */
  public static HttpTransport discover(ClassLoader classLoader) {
    Objects.requireNonNull(classLoader, "classLoader");
    Iterator<HttpTransportProvider> it =
        ServiceLoader.load(HttpTransportProvider.class, classLoader).iterator();
    if (!it.hasNext()) {
      throw new IllegalStateException(
          "no HttpTransport implementation found: add io.kvroute:kvconnector-http to the class"
              + " path (or module path), or pass a transport explicitly");
    }
    return it.next().create();
  }
}
