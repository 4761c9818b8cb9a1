package io.kvroute.opentelemetry;

import io.opentelemetry.context.propagation.TextMapGetter;
import io.opentelemetry.context.propagation.TextMapSetter;
import java.util.List;
import java.util.Map;

/** Reads trace context from, and writes it to, kvroute's header maps. */
final class Headers {
  private Headers() {}

  /** Reads a case-insensitive {@code Map<String, List<String>>} (kvroute's header maps are). */
  @SuppressWarnings("deprecation") // keys(C) is still abstract: it must be implemented
  static final TextMapGetter<Map<String, List<String>>> GETTER =
      new TextMapGetter<>() {
        @Override
        public Iterable<String> keys(Map<String, List<String>> carrier) {
          return carrier.keySet();
        }

        @Override
        public String get(Map<String, List<String>> carrier, String key) {
          if (carrier == null) {
            return null;
          }
          List<String> v = carrier.get(key);
          return v == null || v.isEmpty() ? null : v.get(0);
        }
      };

  /** Writes into a {@code Map<String, String>}. */
  static final TextMapSetter<Map<String, String>> SETTER =
      (carrier, key, value) -> {
        if (carrier != null) {
          carrier.put(key, value);
        }
      };
}
