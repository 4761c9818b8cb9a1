package io.kvroute.edge.internal;

import io.kvroute.edge.Handler;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Method + path to handler: exact paths, and prefixes given as {@code /some/prefix/*} (longest
 * first). Immutable once built; safe to share between event loops.
 */
public final class Routes {
  private final Map<String, Map<String, Handler>> exact = new HashMap<>();
  private final List<Map.Entry<String, Map<String, Handler>>> prefixes = new ArrayList<>();

  /** What a lookup found. */
  public record Match(Handler handler, Set<String> allowed) {}

  /**
   * Adds a route.
   *
   * @param method e.g. {@code GET}; {@code *} for any
   * @param path an exact path, or a prefix ending in {@code /*}
   * @param handler the handler
   * @throws IllegalArgumentException if the method and path are taken
   */
  public void add(String method, String path, Handler handler) {
    if (!path.startsWith("/")) {
      throw new IllegalArgumentException("route path must start with /: " + path);
    }
    Map<String, Handler> byMethod;
    if (path.endsWith("/*")) {
      String prefix = path.substring(0, path.length() - 1);
      byMethod = null;
      for (Map.Entry<String, Map<String, Handler>> e : prefixes) {
        if (e.getKey().equals(prefix)) {
          byMethod = e.getValue();
        }
      }
      if (byMethod == null) {
        byMethod = new HashMap<>();
        prefixes.add(Map.entry(prefix, byMethod));
        prefixes.sort((a, b) -> b.getKey().length() - a.getKey().length());
      }
    } else {
      byMethod = exact.computeIfAbsent(path, p -> new HashMap<>());
    }
    if (byMethod.putIfAbsent(method, handler) != null) {
      throw new IllegalArgumentException("route " + method + " " + path + " is defined twice");
    }
  }

  /** A copy that later changes to this one do not reach (the server keeps a copy). */
  public Routes copy() {
    Routes r = new Routes();
    exact.forEach((path, byMethod) -> r.exact.put(path, new HashMap<>(byMethod)));
    for (Map.Entry<String, Map<String, Handler>> e : prefixes) {
      r.prefixes.add(Map.entry(e.getKey(), new HashMap<>(e.getValue())));
    }
    return r;
  }

  /**
   * Finds the handler of a request.
   *
   * @return the handler (null if the path is known but not the method, or nothing matched), and the
   *     methods the path allows (empty if the path is unknown)
   */
  public Match find(String method, String path) {
    Map<String, Handler> byMethod = exact.get(path);
    if (byMethod == null) {
      for (Map.Entry<String, Map<String, Handler>> e : prefixes) {
        if (path.startsWith(e.getKey())) {
          byMethod = e.getValue();
          break;
        }
      }
    }
    if (byMethod == null) {
      return new Match(null, Set.of());
    }
    Handler h = byMethod.get(method);
    if (h == null && method.equals("HEAD")) {
      h = byMethod.get("GET");
    }
    if (h == null) {
      h = byMethod.get("*");
    }
    if (h != null) {
      return new Match(h, Set.of());
    }
    Set<String> allowed = new LinkedHashSet<>(byMethod.keySet());
    if (allowed.contains("GET")) {
      allowed.add("HEAD");
    }
    return new Match(null, allowed);
  }
}
