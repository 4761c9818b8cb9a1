package io.kvroute.tokenizer.hf.internal;

import io.kvroute.tokenizer.hf.internal.JinjaAst.Node;
import java.lang.reflect.RecordComponent;
import java.time.ZonedDateTime;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Supplier;

/**
 * A compiled Jinja template, as Hugging Face chat templates use the language (see {@link
 * JinjaLexer}, {@link JinjaParser} and {@link JinjaRuntime} for the supported subset).
 *
 * <p>Immutable and thread-safe: each {@link #render} call uses its own interpreter state.
 */
public final class JinjaTemplate {
  private final List<Node> body;
  private final Supplier<ZonedDateTime> clock;
  private final Set<String> names;

  private JinjaTemplate(List<Node> body, Supplier<ZonedDateTime> clock) {
    this.body = body;
    this.clock = clock;
    Set<String> n = new TreeSet<>();
    collectNames(body, n);
    this.names = Collections.unmodifiableSet(n);
  }

  /**
   * Every variable name the template reads (a superset of jinja2's {@code
   * find_undeclared_variables}); vLLM passes only such {@code chat_template_kwargs} on.
   */
  public Set<String> variableNames() {
    return names;
  }

  private static void collectNames(Object node, Set<String> out) {
    if (node instanceof JinjaAst.Name n) {
      out.add(n.name());
    } else if (node instanceof List<?> l) {
      for (Object o : l) {
        collectNames(o, out);
      }
    } else if (node != null && node.getClass().isRecord()) {
      for (RecordComponent c : node.getClass().getRecordComponents()) {
        try {
          collectNames(c.getAccessor().invoke(node), out);
        } catch (ReflectiveOperationException e) {
          throw new IllegalStateException(e);
        }
      }
    }
  }

  /**
   * Compiles a template.
   *
   * @param source the template text
   * @param clock the time {@code strftime_now} formats
   * @throws io.kvroute.tokenizer.hf.ChatTemplateException on a syntax error
   */
  public static JinjaTemplate compile(String source, Supplier<ZonedDateTime> clock) {
    Objects.requireNonNull(source, "source");
    return new JinjaTemplate(
        JinjaParser.parse(JinjaLexer.tokenize(source)), Objects.requireNonNull(clock, "clock"));
  }

  /**
   * Renders the template. Values are Java forms of JSON: {@code null}, {@link Boolean}, {@link
   * Long}, {@link Double}, {@link String}, {@link List} and {@link Map}.
   *
   * @throws io.kvroute.tokenizer.hf.ChatTemplateException when the template fails (including its
   *     own {@code raise_exception})
   */
  public String render(Map<String, Object> context) {
    return new JinjaRuntime(clock).render(body, context);
  }
}
