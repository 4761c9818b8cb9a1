package io.kvroute.tokenizer.hf.internal;

import io.kvroute.tokenizer.hf.internal.Py.Undefined;
import java.util.HashMap;
import java.util.Map;

/**
 * A variable scope of a render: the globals, the template's context, and one more for each {@code
 * for} body, {@code set} block and macro call. A name is looked up from the innermost scope out.
 *
 * <p>Not thread-safe: it belongs to one render.
 */
final class JinjaScope {
  final JinjaScope parent;
  final Map<String, Object> vars = new HashMap<>();

  JinjaScope(JinjaScope parent) {
    this.parent = parent;
  }

  /** The innermost value of {@code name}, or an {@link Undefined} naming it. */
  Object lookup(String name) {
    for (JinjaScope s = this; s != null; s = s.parent) {
      if (s.vars.containsKey(name)) {
        return s.vars.get(name);
      }
    }
    return new Undefined(name);
  }
}
