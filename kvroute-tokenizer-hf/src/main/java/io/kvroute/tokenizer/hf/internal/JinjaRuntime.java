package io.kvroute.tokenizer.hf.internal;

import io.kvroute.tokenizer.hf.ChatTemplateException;
import io.kvroute.tokenizer.hf.internal.JinjaAst.AttrTarget;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Break;
import io.kvroute.tokenizer.hf.internal.JinjaAst.CallBlock;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Continue;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Expr;
import io.kvroute.tokenizer.hf.internal.JinjaAst.FilterBlock;
import io.kvroute.tokenizer.hf.internal.JinjaAst.FilterCall;
import io.kvroute.tokenizer.hf.internal.JinjaAst.For;
import io.kvroute.tokenizer.hf.internal.JinjaAst.If;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Macro;
import io.kvroute.tokenizer.hf.internal.JinjaAst.NameTarget;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Node;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Output;
import io.kvroute.tokenizer.hf.internal.JinjaAst.SetBlock;
import io.kvroute.tokenizer.hf.internal.JinjaAst.SetVar;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Target;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Text;
import io.kvroute.tokenizer.hf.internal.JinjaAst.TupleTarget;
import io.kvroute.tokenizer.hf.internal.Py.Undefined;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * Renders a parsed template with jinja2's semantics as transformers configures them for chat
 * templates: an immutable sandbox (no mutation of lists or dicts), {@code loopcontrols}, the
 * globals {@code raise_exception}, {@code strftime_now}, {@code range}, {@code namespace}, {@code
 * dict}, and a {@code tojson} filter that writes {@code json.dumps(x, ensure_ascii=False)}.
 *
 * <p>This class runs the statements; {@link JinjaEval} evaluates expressions, with {@link
 * JinjaFilters}, {@link JinjaTests} and the Python methods of {@link PyMethods}.
 *
 * <p>One instance renders one template once; not thread-safe (callers make a new one per render).
 */
final class JinjaRuntime {

  /** A callable value: macros, globals and bound methods. */
  @FunctionalInterface
  interface Fn {
    Object call(List<Object> args, Map<String, Object> kwargs);
  }

  /** jinja2's {@code namespace()}: the one object whose attributes a template may assign. */
  static final class Namespace {
    final Map<String, Object> attrs = new LinkedHashMap<>();
  }

  /** The {@code loop} variable of a {@code for} block. */
  static final class Loop {
    final List<Object> items;
    int index0;

    Loop(List<Object> items) {
      this.items = items;
    }

    Object attr(String name) {
      int n = items.size();
      return switch (name) {
        case "index" -> (long) index0 + 1;
        case "index0" -> (long) index0;
        case "revindex" -> (long) (n - index0);
        case "revindex0" -> (long) (n - index0 - 1);
        case "first" -> index0 == 0;
        case "last" -> index0 == n - 1;
        case "length" -> (long) n;
        case "depth" -> 1L;
        case "depth0" -> 0L;
        case "previtem" -> index0 > 0 ? items.get(index0 - 1) : new Undefined("loop.previtem");
        case "nextitem" -> index0 < n - 1 ? items.get(index0 + 1) : new Undefined("loop.nextitem");
        case "cycle" ->
            (Fn)
                (args, kw) -> {
                  if (args.isEmpty()) {
                    throw Py.typeError("no items for cycling given");
                  }
                  return args.get(index0 % args.size());
                };
        default -> new Undefined("loop." + name);
      };
    }
  }

  private enum Signal {
    NORMAL,
    BREAK,
    CONTINUE
  }

  private static final int MAX_DEPTH = 200;
  private static final long MAX_OUTPUT_CHARS = 64L << 20;

  private final Supplier<ZonedDateTime> now;
  private int depth;
  private long produced;

  JinjaRuntime(Supplier<ZonedDateTime> now) {
    this.now = now;
  }

  /** Renders {@code body} with {@code context} as the top-level variables. */
  String render(List<Node> body, Map<String, Object> context) {
    JinjaScope globals = new JinjaScope(null);
    globals.vars.put("range", (Fn) JinjaRuntime::range);
    globals.vars.put("namespace", (Fn) (args, kw) -> namespace(args, kw));
    globals.vars.put("dict", (Fn) (args, kw) -> dict(args, kw));
    globals.vars.put(
        "raise_exception",
        (Fn)
            (args, kw) -> {
              throw new ChatTemplateException(
                  args.isEmpty() ? "raise_exception()" : Py.str(args.get(0)));
            });
    globals.vars.put(
        "strftime_now",
        (Fn) (args, kw) -> Strftime.format(Py.str(Py.arg(args, kw, 0, "format", "")), now.get()));
    JinjaScope root = new JinjaScope(globals);
    root.vars.putAll(context);
    StringBuilder out = new StringBuilder();
    renderAll(body, root, out);
    return out.toString();
  }

  // ------------------------------------------------------------------ statements

  private Signal renderAll(List<Node> nodes, JinjaScope scope, StringBuilder out) {
    for (Node n : nodes) {
      Signal s = render(n, scope, out);
      if (s != Signal.NORMAL) {
        return s;
      }
    }
    return Signal.NORMAL;
  }

  private Signal render(Node node, JinjaScope scope, StringBuilder out) {
    if (node instanceof Text t) {
      append(out, t.text());
    } else if (node instanceof Output o) {
      append(out, Py.str(JinjaEval.eval(o.expr(), scope)));
    } else if (node instanceof If f) {
      for (int k = 0; k < f.conditions().size(); k++) {
        if (Py.truthy(JinjaEval.eval(f.conditions().get(k), scope))) {
          return renderAll(f.bodies().get(k), scope, out);
        }
      }
      return renderAll(f.otherwise(), scope, out);
    } else if (node instanceof For f) {
      renderFor(f, scope, out);
    } else if (node instanceof SetVar s) {
      assign(s.target(), JinjaEval.eval(s.value(), scope), scope);
    } else if (node instanceof SetBlock s) {
      assign(
          s.target(), renderFiltered(s.body(), new JinjaScope(scope), s.filters(), scope), scope);
    } else if (node instanceof Macro m) {
      scope.vars.put(m.name(), macro(m.params(), m.defaults(), m.body(), scope));
    } else if (node instanceof CallBlock c) {
      Fn caller = macro(c.params(), c.defaults(), c.body(), scope);
      Object fn = JinjaEval.eval(c.call().fn(), scope);
      List<Object> args = JinjaEval.evalAll(c.call().args(), scope);
      Map<String, Object> kw =
          JinjaEval.evalKeywords(c.call().kwNames(), c.call().kwValues(), scope);
      kw.put("caller", caller);
      append(out, Py.str(JinjaEval.callValue(fn, args, kw)));
    } else if (node instanceof FilterBlock fb) {
      append(out, Py.str(renderFiltered(fb.body(), scope, fb.filters(), scope)));
    } else if (node instanceof Break) {
      return Signal.BREAK;
    } else if (node instanceof Continue) {
      return Signal.CONTINUE;
    }
    return Signal.NORMAL;
  }

  /** A block's output (rendered in {@code bodyScope}) through {@code filters}. */
  private Object renderFiltered(
      List<Node> body, JinjaScope bodyScope, List<FilterCall> filters, JinjaScope scope) {
    StringBuilder sb = new StringBuilder();
    renderAll(body, bodyScope, sb);
    Object v = sb.toString();
    for (FilterCall fc : filters) {
      v = JinjaEval.applyFilter(fc, v, scope);
    }
    return v;
  }

  private void append(StringBuilder out, String s) {
    produced += s.length();
    if (produced > MAX_OUTPUT_CHARS) {
      throw new ChatTemplateException(
          "chat template output exceeds " + MAX_OUTPUT_CHARS + " chars");
    }
    out.append(s);
  }

  private void renderFor(For f, JinjaScope scope, StringBuilder out) {
    Object iterable = JinjaEval.eval(f.iterable(), scope);
    if (iterable == null) {
      throw Py.typeError("'NoneType' object is not iterable");
    }
    List<Object> items = Py.iterate(iterable);
    JinjaScope body = new JinjaScope(scope);
    if (f.filter() != null) {
      List<Object> kept = new ArrayList<>();
      for (Object item : items) {
        assignLocal(f.target(), item, body);
        if (Py.truthy(JinjaEval.eval(f.filter(), body))) {
          kept.add(item);
        }
      }
      items = kept;
    }
    if (items.isEmpty()) {
      renderAll(f.otherwise(), scope, out);
      return;
    }
    Loop loop = new Loop(items);
    body.vars.put("loop", loop);
    for (int k = 0; k < items.size(); k++) {
      loop.index0 = k;
      assignLocal(f.target(), items.get(k), body);
      if (renderAll(f.body(), body, out) == Signal.BREAK) {
        break;
      }
    }
  }

  private void assign(Target t, Object value, JinjaScope scope) {
    if (t instanceof AttrTarget a) {
      Object ns = scope.lookup(a.object());
      if (!(ns instanceof Namespace n)) {
        throw Py.typeError("cannot assign attribute on non-namespace object '" + a.object() + "'");
      }
      n.attrs.put(a.attr(), value);
      return;
    }
    assignLocal(t, value, scope);
  }

  private void assignLocal(Target t, Object value, JinjaScope scope) {
    if (t instanceof NameTarget n) {
      scope.vars.put(n.name(), value);
    } else if (t instanceof TupleTarget tt) {
      List<Object> items = Py.iterate(value);
      if (items.size() != tt.items().size()) {
        throw Py.typeError(
            "cannot unpack " + items.size() + " values into " + tt.items().size() + " names");
      }
      for (int k = 0; k < items.size(); k++) {
        assign(tt.items().get(k), items.get(k), scope);
      }
    } else if (t instanceof AttrTarget) {
      assign(t, value, scope);
    }
  }

  private Fn macro(List<String> params, List<Expr> defaults, List<Node> body, JinjaScope closure) {
    return (args, kw) -> {
      if (++depth > MAX_DEPTH) {
        throw new ChatTemplateException("chat template recursion deeper than " + MAX_DEPTH);
      }
      try {
        JinjaScope s = new JinjaScope(closure);
        for (int k = 0; k < params.size(); k++) {
          String p = params.get(k);
          if (k < args.size()) {
            s.vars.put(p, args.get(k));
          } else if (kw.containsKey(p)) {
            s.vars.put(p, kw.get(p));
          } else if (defaults.get(k) != null) {
            s.vars.put(p, JinjaEval.eval(defaults.get(k), s));
          } else {
            s.vars.put(p, new Undefined(p));
          }
        }
        List<Object> varargs =
            args.size() > params.size()
                ? new ArrayList<>(args.subList(params.size(), args.size()))
                : new ArrayList<>();
        s.vars.put("varargs", varargs);
        Map<String, Object> kwargs = new LinkedHashMap<>();
        for (Map.Entry<String, Object> e : kw.entrySet()) {
          if (!params.contains(e.getKey()) && !e.getKey().equals("caller")) {
            kwargs.put(e.getKey(), e.getValue());
          }
        }
        s.vars.put("kwargs", kwargs);
        if (kw.containsKey("caller")) {
          s.vars.put("caller", kw.get("caller"));
        }
        StringBuilder sb = new StringBuilder();
        renderAll(body, s, sb);
        return sb.toString();
      } finally {
        depth--;
      }
    };
  }

  // ------------------------------------------------------------------ globals

  private static Object range(List<Object> args, Map<String, Object> kw) {
    long start = 0;
    long stop;
    long step = 1;
    if (args.size() == 1) {
      stop = Py.toLong(args.get(0));
    } else if (args.size() >= 2) {
      start = Py.toLong(args.get(0));
      stop = Py.toLong(args.get(1));
      if (args.size() > 2) {
        step = Py.toLong(args.get(2));
      }
    } else {
      throw Py.typeError("range expected at least 1 argument");
    }
    if (step == 0) {
      throw Py.typeError("range() arg 3 must not be zero");
    }
    List<Object> out = new ArrayList<>();
    for (long v = start; step > 0 ? v < stop : v > stop; v += step) {
      out.add(v);
      if (out.size() > 1_000_000) {
        throw Py.typeError("range too large");
      }
    }
    return out;
  }

  private static Object namespace(List<Object> args, Map<String, Object> kw) {
    Namespace ns = new Namespace();
    for (Object a : args) {
      if (a instanceof Map<?, ?> m) {
        m.forEach((k, v) -> ns.attrs.put(Py.str(k), v));
      }
    }
    ns.attrs.putAll(kw);
    return ns;
  }

  private static Object dict(List<Object> args, Map<String, Object> kw) {
    Map<Object, Object> out = new LinkedHashMap<>();
    for (Object a : args) {
      if (a instanceof Map<?, ?> m) {
        out.putAll(m);
      } else {
        for (Object pair : Py.iterate(a)) {
          List<Object> p = Py.iterate(pair);
          out.put(p.get(0), p.get(1));
        }
      }
    }
    out.putAll(kw);
    return out;
  }
}
