package io.kvroute.tokenizer.hf.internal;

import io.kvroute.tokenizer.hf.ChatTemplateException;
import io.kvroute.tokenizer.hf.internal.JinjaParser.And;
import io.kvroute.tokenizer.hf.internal.JinjaParser.AttrTarget;
import io.kvroute.tokenizer.hf.internal.JinjaParser.Binary;
import io.kvroute.tokenizer.hf.internal.JinjaParser.Break;
import io.kvroute.tokenizer.hf.internal.JinjaParser.Call;
import io.kvroute.tokenizer.hf.internal.JinjaParser.CallBlock;
import io.kvroute.tokenizer.hf.internal.JinjaParser.Compare;
import io.kvroute.tokenizer.hf.internal.JinjaParser.Concat;
import io.kvroute.tokenizer.hf.internal.JinjaParser.CondExpr;
import io.kvroute.tokenizer.hf.internal.JinjaParser.Const;
import io.kvroute.tokenizer.hf.internal.JinjaParser.Continue;
import io.kvroute.tokenizer.hf.internal.JinjaParser.DictLit;
import io.kvroute.tokenizer.hf.internal.JinjaParser.Expr;
import io.kvroute.tokenizer.hf.internal.JinjaParser.Filter;
import io.kvroute.tokenizer.hf.internal.JinjaParser.FilterBlock;
import io.kvroute.tokenizer.hf.internal.JinjaParser.FilterCall;
import io.kvroute.tokenizer.hf.internal.JinjaParser.For;
import io.kvroute.tokenizer.hf.internal.JinjaParser.GetAttr;
import io.kvroute.tokenizer.hf.internal.JinjaParser.GetItem;
import io.kvroute.tokenizer.hf.internal.JinjaParser.If;
import io.kvroute.tokenizer.hf.internal.JinjaParser.ListLit;
import io.kvroute.tokenizer.hf.internal.JinjaParser.Macro;
import io.kvroute.tokenizer.hf.internal.JinjaParser.Name;
import io.kvroute.tokenizer.hf.internal.JinjaParser.NameTarget;
import io.kvroute.tokenizer.hf.internal.JinjaParser.Node;
import io.kvroute.tokenizer.hf.internal.JinjaParser.Not;
import io.kvroute.tokenizer.hf.internal.JinjaParser.Or;
import io.kvroute.tokenizer.hf.internal.JinjaParser.Output;
import io.kvroute.tokenizer.hf.internal.JinjaParser.SetBlock;
import io.kvroute.tokenizer.hf.internal.JinjaParser.SetVar;
import io.kvroute.tokenizer.hf.internal.JinjaParser.Slice;
import io.kvroute.tokenizer.hf.internal.JinjaParser.Target;
import io.kvroute.tokenizer.hf.internal.JinjaParser.Test;
import io.kvroute.tokenizer.hf.internal.JinjaParser.Text;
import io.kvroute.tokenizer.hf.internal.JinjaParser.TupleLit;
import io.kvroute.tokenizer.hf.internal.JinjaParser.TupleTarget;
import io.kvroute.tokenizer.hf.internal.JinjaParser.Unary;
import io.kvroute.tokenizer.hf.internal.Py.Undefined;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Supplier;

/**
 * Renders a parsed template with jinja2's semantics as transformers configures them for chat
 * templates: an immutable sandbox (no mutation of lists or dicts), {@code loopcontrols}, the
 * globals {@code raise_exception}, {@code strftime_now}, {@code range}, {@code namespace}, {@code
 * dict}, and a {@code tojson} filter that writes {@code json.dumps(x, ensure_ascii=False)}.
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

  /** A variable scope; {@code for} bodies and macro calls get their own. */
  private static final class Scope {
    final Scope parent;
    final Map<String, Object> vars = new HashMap<>();

    Scope(Scope parent) {
      this.parent = parent;
    }

    Object lookup(String name) {
      for (Scope s = this; s != null; s = s.parent) {
        if (s.vars.containsKey(name)) {
          return s.vars.get(name);
        }
      }
      return new Undefined(name);
    }
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
    Scope globals = new Scope(null);
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
        (Fn) (args, kw) -> Strftime.format(Py.str(arg(args, kw, 0, "format", "")), now.get()));
    Scope root = new Scope(globals);
    root.vars.putAll(context);
    StringBuilder out = new StringBuilder();
    renderAll(body, root, out);
    return out.toString();
  }

  // ------------------------------------------------------------------ statements

  private Signal renderAll(List<Node> nodes, Scope scope, StringBuilder out) {
    for (Node n : nodes) {
      Signal s = render(n, scope, out);
      if (s != Signal.NORMAL) {
        return s;
      }
    }
    return Signal.NORMAL;
  }

  private Signal render(Node node, Scope scope, StringBuilder out) {
    if (node instanceof Text t) {
      append(out, t.text());
    } else if (node instanceof Output o) {
      append(out, Py.str(eval(o.expr(), scope)));
    } else if (node instanceof If f) {
      for (int k = 0; k < f.conditions().size(); k++) {
        if (Py.truthy(eval(f.conditions().get(k), scope))) {
          return renderAll(f.bodies().get(k), scope, out);
        }
      }
      return renderAll(f.otherwise(), scope, out);
    } else if (node instanceof For f) {
      renderFor(f, scope, out);
    } else if (node instanceof SetVar s) {
      assign(s.target(), eval(s.value(), scope), scope);
    } else if (node instanceof SetBlock s) {
      StringBuilder sb = new StringBuilder();
      renderAll(s.body(), new Scope(scope), sb);
      Object v = sb.toString();
      for (FilterCall fc : s.filters()) {
        v = applyFilter(fc, v, scope);
      }
      assign(s.target(), v, scope);
    } else if (node instanceof Macro m) {
      scope.vars.put(m.name(), macro(m.params(), m.defaults(), m.body(), scope));
    } else if (node instanceof CallBlock c) {
      Fn caller = macro(c.params(), c.defaults(), c.body(), scope);
      Object fn = eval(c.call().fn(), scope);
      List<Object> args = new ArrayList<>();
      for (Expr a : c.call().args()) {
        args.add(eval(a, scope));
      }
      Map<String, Object> kw = new LinkedHashMap<>();
      for (int k = 0; k < c.call().kwNames().size(); k++) {
        kw.put(c.call().kwNames().get(k), eval(c.call().kwValues().get(k), scope));
      }
      kw.put("caller", caller);
      append(out, Py.str(callValue(fn, args, kw)));
    } else if (node instanceof FilterBlock fb) {
      StringBuilder sb = new StringBuilder();
      renderAll(fb.body(), scope, sb);
      Object v = sb.toString();
      for (FilterCall fc : fb.filters()) {
        v = applyFilter(fc, v, scope);
      }
      append(out, Py.str(v));
    } else if (node instanceof Break) {
      return Signal.BREAK;
    } else if (node instanceof Continue) {
      return Signal.CONTINUE;
    }
    return Signal.NORMAL;
  }

  private void append(StringBuilder out, String s) {
    produced += s.length();
    if (produced > MAX_OUTPUT_CHARS) {
      throw new ChatTemplateException(
          "chat template output exceeds " + MAX_OUTPUT_CHARS + " chars");
    }
    out.append(s);
  }

  private void renderFor(For f, Scope scope, StringBuilder out) {
    Object iterable = eval(f.iterable(), scope);
    if (iterable == null) {
      throw Py.typeError("'NoneType' object is not iterable");
    }
    List<Object> items = Py.iterate(iterable);
    Scope body = new Scope(scope);
    if (f.filter() != null) {
      List<Object> kept = new ArrayList<>();
      for (Object item : items) {
        assignLocal(f.target(), item, body);
        if (Py.truthy(eval(f.filter(), body))) {
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

  private void assign(Target t, Object value, Scope scope) {
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

  private void assignLocal(Target t, Object value, Scope scope) {
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

  private Fn macro(List<String> params, List<Expr> defaults, List<Node> body, Scope closure) {
    return (args, kw) -> {
      if (++depth > MAX_DEPTH) {
        throw new ChatTemplateException("chat template recursion deeper than " + MAX_DEPTH);
      }
      try {
        Scope s = new Scope(closure);
        for (int k = 0; k < params.size(); k++) {
          String p = params.get(k);
          if (k < args.size()) {
            s.vars.put(p, args.get(k));
          } else if (kw.containsKey(p)) {
            s.vars.put(p, kw.get(p));
          } else if (defaults.get(k) != null) {
            s.vars.put(p, eval(defaults.get(k), s));
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

  // ------------------------------------------------------------------ expressions

  Object eval(Expr e, Scope scope) {
    if (e instanceof Const c) {
      return c.value();
    }
    if (e instanceof Name n) {
      return scope.lookup(n.name());
    }
    if (e instanceof GetAttr g) {
      return getattr(eval(g.object(), scope), g.name());
    }
    if (e instanceof GetItem g) {
      return getitem(eval(g.object(), scope), eval(g.key(), scope));
    }
    if (e instanceof Slice s) {
      Object seq = eval(s.object(), scope);
      return Py.slice(
          seq,
          s.start() == null ? null : intOrNone(eval(s.start(), scope)),
          s.stop() == null ? null : intOrNone(eval(s.stop(), scope)),
          s.step() == null ? null : intOrNone(eval(s.step(), scope)));
    }
    if (e instanceof Binary b) {
      return Py.arith(b.op(), eval(b.left(), scope), eval(b.right(), scope));
    }
    if (e instanceof Unary u) {
      Object v = eval(u.operand(), scope);
      if (v instanceof Undefined und) {
        throw und.error();
      }
      if (!Py.isNumber(v)) {
        throw Py.typeError("bad operand type for unary " + u.op() + ": '" + Py.typeName(v) + "'");
      }
      if (u.op().equals("+")) {
        return Py.isInt(v) ? (Object) Py.toLong(v) : v;
      }
      return Py.isInt(v) ? (Object) (-Py.toLong(v)) : -Py.toDouble(v);
    }
    if (e instanceof And a) {
      Object l = eval(a.left(), scope);
      return Py.truthy(l) ? eval(a.right(), scope) : l;
    }
    if (e instanceof Or o) {
      Object l = eval(o.left(), scope);
      return Py.truthy(l) ? l : eval(o.right(), scope);
    }
    if (e instanceof Not n) {
      return !Py.truthy(eval(n.operand(), scope));
    }
    if (e instanceof Compare c) {
      Object left = eval(c.first(), scope);
      for (int k = 0; k < c.ops().size(); k++) {
        Object right = eval(c.rest().get(k), scope);
        if (!compare(c.ops().get(k), left, right)) {
          return false;
        }
        left = right;
      }
      return true;
    }
    if (e instanceof CondExpr c) {
      if (Py.truthy(eval(c.condition(), scope))) {
        return eval(c.then(), scope);
      }
      return c.otherwise() == null ? new Undefined("conditional") : eval(c.otherwise(), scope);
    }
    if (e instanceof Concat c) {
      StringBuilder sb = new StringBuilder();
      for (Expr p : c.parts()) {
        sb.append(Py.str(eval(p, scope)));
      }
      return sb.toString();
    }
    if (e instanceof ListLit l) {
      List<Object> out = new ArrayList<>();
      for (Expr x : l.items()) {
        out.add(eval(x, scope));
      }
      return out;
    }
    if (e instanceof TupleLit l) {
      List<Object> out = new ArrayList<>();
      for (Expr x : l.items()) {
        out.add(eval(x, scope));
      }
      return java.util.Collections.unmodifiableList(out);
    }
    if (e instanceof DictLit d) {
      Map<Object, Object> out = new LinkedHashMap<>();
      for (int k = 0; k < d.keys().size(); k++) {
        out.put(eval(d.keys().get(k), scope), eval(d.values().get(k), scope));
      }
      return out;
    }
    if (e instanceof Call c) {
      List<Object> args = new ArrayList<>();
      for (Expr a : c.args()) {
        args.add(eval(a, scope));
      }
      Map<String, Object> kw = new LinkedHashMap<>();
      for (int k = 0; k < c.kwNames().size(); k++) {
        kw.put(c.kwNames().get(k), eval(c.kwValues().get(k), scope));
      }
      Object fn = eval(c.fn(), scope);
      return callValue(fn, args, kw);
    }
    if (e instanceof Filter f) {
      return applyFilter(f.filter(), eval(f.value(), scope), scope);
    }
    if (e instanceof Test t) {
      Object v = eval(t.value(), scope);
      List<Object> args = new ArrayList<>();
      for (Expr a : t.args()) {
        args.add(eval(a, scope));
      }
      boolean r = test(t.name(), v, args, scope);
      return t.negated() != r;
    }
    throw new ChatTemplateException("chat template error: cannot evaluate " + e);
  }

  private static Object intOrNone(Object v) {
    if (v == null) {
      return null;
    }
    if (!Py.isInt(v)) {
      throw Py.typeError("slice indices must be integers or None");
    }
    return v;
  }

  private Object callValue(Object fn, List<Object> args, Map<String, Object> kw) {
    if (fn instanceof Fn f) {
      return f.call(args, kw);
    }
    if (fn instanceof Undefined u) {
      throw u.error();
    }
    throw Py.typeError("'" + Py.typeName(fn) + "' object is not callable");
  }

  private static boolean compare(String op, Object a, Object b) {
    return switch (op) {
      case "==" -> Py.eq(a, b);
      case "!=" -> !Py.eq(a, b);
      case "<" -> Py.compare(a, b) < 0;
      case "<=" -> Py.compare(a, b) <= 0;
      case ">" -> Py.compare(a, b) > 0;
      case ">=" -> Py.compare(a, b) >= 0;
      case "in" -> Py.contains(b, a);
      case "notin" -> !Py.contains(b, a);
      default -> throw Py.typeError("unknown comparison " + op);
    };
  }

  // ------------------------------------------------------------------ attribute access

  /** {@code obj.name}: attributes (methods) first, then items (jinja2's {@code getattr}). */
  Object getattr(Object obj, String name) {
    if (obj instanceof Undefined u) {
      throw u.error();
    }
    if (obj instanceof Namespace ns) {
      return ns.attrs.containsKey(name) ? ns.attrs.get(name) : new Undefined(name);
    }
    if (obj instanceof Loop loop) {
      return loop.attr(name);
    }
    Object method = method(obj, name);
    if (method != null) {
      return method;
    }
    if (obj instanceof Map<?, ?> m) {
      return m.containsKey(name) ? m.get(name) : new Undefined(name);
    }
    return new Undefined(name);
  }

  /** {@code obj[key]}: items first, then attributes (jinja2's {@code getitem}). */
  Object getitem(Object obj, Object key) {
    if (obj instanceof Undefined u) {
      throw u.error();
    }
    if (obj instanceof Map<?, ?> m) {
      if (m.containsKey(key)) {
        return m.get(key);
      }
      if (Py.isInt(key)) {
        for (Map.Entry<?, ?> e : m.entrySet()) {
          if (Py.eq(e.getKey(), key)) {
            return e.getValue();
          }
        }
      }
      if (key instanceof String s) {
        Object method = method(obj, s);
        if (method != null) {
          return method;
        }
      }
      return new Undefined(Py.str(key));
    }
    if (obj instanceof List<?> || obj instanceof String) {
      if (Py.isInt(key)) {
        return Py.index(obj, key);
      }
      if (key instanceof String s) {
        Object method = method(obj, s);
        return method != null ? method : new Undefined(s);
      }
    }
    if (key instanceof String s) {
      return getattr(obj, s);
    }
    return new Undefined(Py.str(key));
  }

  private Object method(Object obj, String name) {
    if (obj instanceof String s) {
      return stringMethod(s, name);
    }
    if (obj instanceof Map<?, ?> m) {
      return switch (name) {
        case "items" ->
            (Fn)
                (a, k) -> {
                  List<Object> out = new ArrayList<>();
                  for (Map.Entry<?, ?> e : m.entrySet()) {
                    out.add(java.util.Arrays.asList(e.getKey(), e.getValue()));
                  }
                  return out;
                };
        case "keys" -> (Fn) (a, k) -> new ArrayList<Object>(m.keySet());
        case "values" -> (Fn) (a, k) -> new ArrayList<Object>(m.values());
        case "get" ->
            (Fn)
                (a, k) -> {
                  Object key = a.isEmpty() ? null : a.get(0);
                  Object dflt = a.size() > 1 ? a.get(1) : k.getOrDefault("default", null);
                  return m.containsKey(key) ? m.get(key) : dflt;
                };
        case "copy" -> (Fn) (a, k) -> new LinkedHashMap<Object, Object>(m);
        case "update", "pop", "setdefault", "clear", "popitem" -> immutable(name);
        default -> null;
      };
    }
    if (obj instanceof List<?> l) {
      return switch (name) {
        case "index" ->
            (Fn)
                (a, k) -> {
                  for (int x = 0; x < l.size(); x++) {
                    if (Py.eq(l.get(x), a.get(0))) {
                      return (long) x;
                    }
                  }
                  throw Py.typeError(Py.repr(a.get(0)) + " is not in list");
                };
        case "count" ->
            (Fn)
                (a, k) -> {
                  long c = 0;
                  for (Object o : l) {
                    if (Py.eq(o, a.get(0))) {
                      c++;
                    }
                  }
                  return c;
                };
        case "copy" -> (Fn) (a, k) -> new ArrayList<Object>(l);
        case "append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse" ->
            immutable(name);
        default -> null;
      };
    }
    return null;
  }

  private static Fn immutable(String name) {
    return (a, k) -> {
      throw new ChatTemplateException(
          "chat template error: access to attribute '"
              + name
              + "' of a mutable value is unsafe (immutable sandbox)");
    };
  }

  private static Fn stringMethod(String s, String name) {
    return switch (name) {
      case "strip" -> (a, k) -> Py.strip(s, charsArg(a), true, true);
      case "lstrip" -> (a, k) -> Py.strip(s, charsArg(a), true, false);
      case "rstrip" -> (a, k) -> Py.strip(s, charsArg(a), false, true);
      case "split" ->
          (a, k) ->
              Py.split(
                  s, (String) arg(a, k, 0, "sep", null), Py.toLong(arg(a, k, 1, "maxsplit", -1L)));
      case "rsplit" ->
          (a, k) ->
              Py.rsplit(
                  s, (String) arg(a, k, 0, "sep", null), Py.toLong(arg(a, k, 1, "maxsplit", -1L)));
      case "splitlines" ->
          (a, k) -> {
            List<Object> out = new ArrayList<>();
            for (String line : s.split("\r\n|\r|\n", -1)) {
              out.add(line);
            }
            if (!out.isEmpty() && ((String) out.get(out.size() - 1)).isEmpty()) {
              out.remove(out.size() - 1);
            }
            return out;
          };
      case "startswith" -> (a, k) -> affix(s, a.get(0), true);
      case "endswith" -> (a, k) -> affix(s, a.get(0), false);
      case "upper" -> (a, k) -> s.toUpperCase(Locale.ROOT);
      case "lower" -> (a, k) -> s.toLowerCase(Locale.ROOT);
      case "title" -> (a, k) -> Py.title(s);
      case "capitalize" -> (a, k) -> Py.capitalize(s);
      case "replace" ->
          (a, k) -> {
            String old = Py.str(a.get(0));
            String rep = Py.str(a.get(1));
            long count = a.size() > 2 ? Py.toLong(a.get(2)) : -1;
            return replace(s, old, rep, count);
          };
      case "find" -> (a, k) -> (long) cpIndex(s, s.indexOf(Py.str(a.get(0))));
      case "rfind" -> (a, k) -> (long) cpIndex(s, s.lastIndexOf(Py.str(a.get(0))));
      case "count" ->
          (a, k) -> {
            String sub = Py.str(a.get(0));
            if (sub.isEmpty()) {
              return (long) Py.len(s) + 1;
            }
            long c = 0;
            int from = 0;
            while ((from = s.indexOf(sub, from)) >= 0) {
              c++;
              from += sub.length();
            }
            return c;
          };
      case "join" ->
          (a, k) -> {
            StringBuilder sb = new StringBuilder();
            boolean first = true;
            for (Object o : Py.iterate(a.get(0))) {
              if (!first) {
                sb.append(s);
              }
              first = false;
              if (!(o instanceof String str)) {
                throw Py.typeError(
                    "sequence item: expected str instance, " + Py.typeName(o) + " found");
              }
              sb.append(str);
            }
            return sb.toString();
          };
      case "isdigit" -> (a, k) -> !s.isEmpty() && s.codePoints().allMatch(Character::isDigit);
      case "isalpha" -> (a, k) -> !s.isEmpty() && s.codePoints().allMatch(Character::isLetter);
      case "isspace" -> (a, k) -> !s.isEmpty() && s.chars().allMatch(Py::isSpace);
      case "islower" ->
          (a, k) -> s.chars().anyMatch(Character::isLetter) && s.equals(s.toLowerCase(Locale.ROOT));
      case "isupper" ->
          (a, k) -> s.chars().anyMatch(Character::isLetter) && s.equals(s.toUpperCase(Locale.ROOT));
      case "format" -> (a, k) -> format(s, a, k);
      default -> null;
    };
  }

  private static int cpIndex(String s, int utf16) {
    return utf16 < 0 ? -1 : s.codePointCount(0, utf16);
  }

  private static String replace(String s, String old, String rep, long count) {
    if (count < 0) {
      if (old.isEmpty()) {
        StringBuilder sb = new StringBuilder(rep);
        s.codePoints().forEach(c -> sb.appendCodePoint(c).append(rep));
        return sb.toString();
      }
      return s.replace(old, rep);
    }
    StringBuilder sb = new StringBuilder();
    int from = 0;
    long n = 0;
    while (n < count && !old.isEmpty()) {
      int f = s.indexOf(old, from);
      if (f < 0) {
        break;
      }
      sb.append(s, from, f).append(rep);
      from = f + old.length();
      n++;
    }
    return sb.append(s.substring(from)).toString();
  }

  private static String format(String fmt, List<Object> args, Map<String, Object> kw) {
    StringBuilder sb = new StringBuilder();
    int auto = 0;
    for (int k = 0; k < fmt.length(); k++) {
      char c = fmt.charAt(k);
      if (c == '{' && k + 1 < fmt.length() && fmt.charAt(k + 1) == '{') {
        sb.append('{');
        k++;
      } else if (c == '}' && k + 1 < fmt.length() && fmt.charAt(k + 1) == '}') {
        sb.append('}');
        k++;
      } else if (c == '{') {
        int end = fmt.indexOf('}', k);
        if (end < 0) {
          throw Py.typeError("Single '{' encountered in format string");
        }
        String field = fmt.substring(k + 1, end);
        Object v;
        if (field.isEmpty()) {
          v = args.get(auto++);
        } else if (field.chars().allMatch(Character::isDigit)) {
          v = args.get(Integer.parseInt(field));
        } else {
          v = kw.get(field);
        }
        sb.append(Py.str(v));
        k = end;
      } else {
        sb.append(c);
      }
    }
    return sb.toString();
  }

  private static String charsArg(List<Object> a) {
    return a.isEmpty() || a.get(0) == null ? null : Py.str(a.get(0));
  }

  private static boolean affix(String s, Object arg, boolean prefix) {
    if (arg instanceof List<?> l) {
      for (Object o : l) {
        if (affix(s, o, prefix)) {
          return true;
        }
      }
      return false;
    }
    if (!(arg instanceof String a)) {
      throw Py.typeError(
          (prefix ? "startswith" : "endswith")
              + " first arg must be str or a tuple of str, not "
              + Py.typeName(arg));
    }
    return prefix ? s.startsWith(a) : s.endsWith(a);
  }

  static Object arg(List<Object> args, Map<String, Object> kw, int pos, String name, Object dflt) {
    if (pos < args.size()) {
      return args.get(pos);
    }
    return kw.containsKey(name) ? kw.get(name) : dflt;
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

  // ------------------------------------------------------------------ tests

  private boolean test(String name, Object v, List<Object> args, Scope scope) {
    switch (name) {
      case "defined":
        return !(v instanceof Undefined);
      case "undefined":
        return v instanceof Undefined;
      case "none":
        return v == null;
      case "string":
        return v instanceof String;
      case "number":
        return Py.isNumber(v);
      case "integer":
        return Py.isInt(v) && !(v instanceof Boolean);
      case "float":
        return v instanceof Double;
      case "boolean":
        return v instanceof Boolean;
      case "true":
        return Boolean.TRUE.equals(v);
      case "false":
        return Boolean.FALSE.equals(v);
      case "mapping":
        return v instanceof Map;
      case "sequence":
        return v instanceof List || v instanceof String || v instanceof Map;
      case "iterable":
        return v instanceof List
            || v instanceof String
            || v instanceof Map
            || v instanceof Collection;
      case "callable":
        return v instanceof Fn;
      case "odd":
        return Py.toLong(v) % 2 != 0;
      case "even":
        return Py.toLong(v) % 2 == 0;
      case "divisibleby":
        return Py.toLong(v) % Py.toLong(args.get(0)) == 0;
      case "eq", "equalto", "==":
        return Py.eq(v, args.get(0));
      case "ne", "!=":
        return !Py.eq(v, args.get(0));
      case "lt", "lessthan", "<":
        return Py.compare(v, args.get(0)) < 0;
      case "le", "<=":
        return Py.compare(v, args.get(0)) <= 0;
      case "gt", "greaterthan", ">":
        return Py.compare(v, args.get(0)) > 0;
      case "ge", ">=":
        return Py.compare(v, args.get(0)) >= 0;
      case "in":
        return Py.contains(args.get(0), v);
      case "sameas":
        return Py.same(v, args.get(0));
      case "lower":
        return v instanceof String s && s.equals(s.toLowerCase(Locale.ROOT));
      case "upper":
        return v instanceof String s && s.equals(s.toUpperCase(Locale.ROOT));
      case "escaped":
        return false;
      case "filter":
        return FILTERS.contains(Py.str(v));
      case "test":
        return TESTS.contains(Py.str(v));
      default:
        throw new ChatTemplateException("chat template error: no test named '" + name + "'");
    }
  }

  private static final java.util.Set<String> TESTS =
      java.util.Set.of(
          "defined",
          "undefined",
          "none",
          "string",
          "number",
          "integer",
          "float",
          "boolean",
          "true",
          "false",
          "mapping",
          "sequence",
          "iterable",
          "callable",
          "odd",
          "even",
          "divisibleby",
          "eq",
          "equalto",
          "ne",
          "lt",
          "le",
          "gt",
          "ge",
          "in",
          "sameas",
          "lower",
          "upper",
          "escaped");

  private static final java.util.Set<String> FILTERS =
      java.util.Set.of(
          "abs",
          "attr",
          "capitalize",
          "count",
          "d",
          "default",
          "dictsort",
          "e",
          "escape",
          "first",
          "float",
          "indent",
          "int",
          "items",
          "join",
          "last",
          "length",
          "list",
          "lower",
          "map",
          "max",
          "min",
          "reject",
          "rejectattr",
          "replace",
          "reverse",
          "round",
          "safe",
          "select",
          "selectattr",
          "sort",
          "string",
          "sum",
          "title",
          "tojson",
          "trim",
          "unique",
          "upper",
          "wordcount");

  // ------------------------------------------------------------------ filters

  private Object applyFilter(FilterCall fc, Object v, Scope scope) {
    List<Object> args = new ArrayList<>();
    for (Expr a : fc.args()) {
      args.add(eval(a, scope));
    }
    Map<String, Object> kw = new LinkedHashMap<>();
    for (int k = 0; k < fc.kwNames().size(); k++) {
      kw.put(fc.kwNames().get(k), eval(fc.kwValues().get(k), scope));
    }
    return filter(fc.name(), v, args, kw, scope);
  }

  private Object filter(
      String name, Object v, List<Object> args, Map<String, Object> kw, Scope scope) {
    switch (name) {
      case "length", "count":
        return (long) Py.len(v);
      case "tojson":
        {
          Object indent = arg(args, kw, 0, "indent", null);
          Object seps = kw.get("separators");
          String is = null;
          String ks = null;
          if (seps instanceof List<?> l && l.size() == 2) {
            is = Py.str(l.get(0));
            ks = Py.str(l.get(1));
          }
          boolean sort = Py.truthy(kw.getOrDefault("sort_keys", false));
          return Py.toJson(v, indent == null ? null : (int) Py.toLong(indent), is, ks, sort);
        }
      case "trim":
        return Py.strip(Py.str(v), charsArg(args), true, true);
      case "upper":
        return Py.str(v).toUpperCase(Locale.ROOT);
      case "lower":
        return Py.str(v).toLowerCase(Locale.ROOT);
      case "title":
        return Py.title(Py.str(v));
      case "capitalize":
        return Py.capitalize(Py.str(v));
      case "string":
        return Py.str(v);
      case "safe", "e", "escape", "forceescape":
        return name.equals("safe") ? v : escape(Py.str(v));
      case "first":
        {
          List<Object> l = Py.iterate(v);
          return l.isEmpty() ? new Undefined("first") : l.get(0);
        }
      case "last":
        {
          List<Object> l = Py.iterate(v);
          return l.isEmpty() ? new Undefined("last") : l.get(l.size() - 1);
        }
      case "list":
        return Py.iterate(v);
      case "reverse":
        {
          if (v instanceof String s) {
            return new StringBuilder(s).reverse().toString();
          }
          List<Object> l = Py.iterate(v);
          java.util.Collections.reverse(l);
          return l;
        }
      case "join":
        {
          String sep = Py.str(arg(args, kw, 0, "d", ""));
          Object attr = arg(args, kw, 1, "attribute", null);
          StringBuilder sb = new StringBuilder();
          boolean first = true;
          for (Object o : Py.iterate(v)) {
            if (!first) {
              sb.append(sep);
            }
            first = false;
            sb.append(Py.str(attr == null ? o : attribute(o, Py.str(attr))));
          }
          return sb.toString();
        }
      case "default", "d":
        {
          Object dflt = arg(args, kw, 0, "default_value", "");
          boolean bool = Py.truthy(arg(args, kw, 1, "boolean", false));
          if (v instanceof Undefined || (bool && !Py.truthy(v))) {
            return dflt;
          }
          return v;
        }
      case "int":
        {
          Object dflt = arg(args, kw, 0, "default", 0L);
          if (Py.isNumber(v)) {
            return (long) Py.toDouble(v);
          }
          try {
            return Long.parseLong(Py.str(v).strip());
          } catch (NumberFormatException ex) {
            try {
              return (long) Double.parseDouble(Py.str(v).strip());
            } catch (NumberFormatException ex2) {
              return dflt;
            }
          }
        }
      case "float":
        {
          Object dflt = arg(args, kw, 0, "default", 0.0);
          if (Py.isNumber(v)) {
            return Py.toDouble(v);
          }
          try {
            return Double.parseDouble(Py.str(v).strip());
          } catch (NumberFormatException ex) {
            return dflt;
          }
        }
      case "abs":
        return Py.isInt(v) ? (Object) Math.abs(Py.toLong(v)) : Math.abs(Py.toDouble(v));
      case "round":
        {
          long precision = Py.toLong(arg(args, kw, 0, "precision", 0L));
          String method = Py.str(arg(args, kw, 1, "method", "common"));
          double f = Math.pow(10, precision);
          double x = Py.toDouble(v) * f;
          double r =
              switch (method) {
                case "ceil" -> Math.ceil(x);
                case "floor" -> Math.floor(x);
                default -> Math.signum(x) * Math.floor(Math.abs(x) + 0.5);
              };
          return r / f;
        }
      case "replace":
        {
          long count = args.size() > 2 ? Py.toLong(args.get(2)) : -1;
          return replace(Py.str(v), Py.str(args.get(0)), Py.str(args.get(1)), count);
        }
      case "items":
        {
          if (v instanceof Undefined) {
            return new ArrayList<>();
          }
          if (!(v instanceof Map<?, ?> m)) {
            throw Py.typeError("can only get item pairs from a mapping");
          }
          List<Object> out = new ArrayList<>();
          m.forEach((k, val) -> out.add(java.util.Arrays.asList(k, val)));
          return out;
        }
      case "dictsort":
        {
          Map<?, ?> m = (Map<?, ?>) v;
          boolean byValue = "value".equals(Py.str(arg(args, kw, 1, "by", "key")));
          boolean reverse = Py.truthy(arg(args, kw, 2, "reverse", false));
          List<Object> out = new ArrayList<>();
          m.forEach((k, val) -> out.add(java.util.Arrays.asList(k, val)));
          out.sort(
              (x, y) -> {
                Object a = ((List<?>) x).get(byValue ? 1 : 0);
                Object b = ((List<?>) y).get(byValue ? 1 : 0);
                if (a instanceof String sa && b instanceof String sb) {
                  return sa.toLowerCase(Locale.ROOT).compareTo(sb.toLowerCase(Locale.ROOT));
                }
                return Py.compare(a, b);
              });
          if (reverse) {
            java.util.Collections.reverse(out);
          }
          return out;
        }
      case "unique":
        {
          List<Object> out = new ArrayList<>();
          for (Object o : Py.iterate(v)) {
            boolean seen = false;
            for (Object p : out) {
              if (Py.eq(p, o)) {
                seen = true;
                break;
              }
            }
            if (!seen) {
              out.add(o);
            }
          }
          return out;
        }
      case "sort":
        {
          boolean reverse = Py.truthy(arg(args, kw, 0, "reverse", false));
          Object attr = arg(args, kw, 2, "attribute", null);
          List<Object> l = Py.iterate(v);
          l.sort(
              (x, y) -> {
                Object a = attr == null ? x : attribute(x, Py.str(attr));
                Object b = attr == null ? y : attribute(y, Py.str(attr));
                if (a instanceof String sa && b instanceof String sb) {
                  return sa.toLowerCase(Locale.ROOT).compareTo(sb.toLowerCase(Locale.ROOT));
                }
                return Py.compare(a, b);
              });
          if (reverse) {
            java.util.Collections.reverse(l);
          }
          return l;
        }
      case "sum":
        {
          Object attr = arg(args, kw, 0, "attribute", null);
          Object total = arg(args, kw, 1, "start", 0L);
          for (Object o : Py.iterate(v)) {
            total = Py.add(total, attr == null ? o : attribute(o, Py.str(attr)));
          }
          return total;
        }
      case "min", "max":
        {
          List<Object> l = Py.iterate(v);
          if (l.isEmpty()) {
            return new Undefined(name);
          }
          Object best = l.get(0);
          for (Object o : l) {
            int c = Py.compare(o, best);
            if (name.equals("min") ? c < 0 : c > 0) {
              best = o;
            }
          }
          return best;
        }
      case "map":
        {
          List<Object> out = new ArrayList<>();
          if (kw.containsKey("attribute")) {
            String attr = Py.str(kw.get("attribute"));
            for (Object o : Py.iterate(v)) {
              Object r = attribute(o, attr);
              if (r instanceof Undefined && kw.containsKey("default")) {
                r = kw.get("default");
              }
              out.add(r);
            }
            return out;
          }
          String f = Py.str(args.get(0));
          List<Object> rest = new ArrayList<>(args.subList(1, args.size()));
          for (Object o : Py.iterate(v)) {
            out.add(filter(f, o, rest, kw, scope));
          }
          return out;
        }
      case "select", "reject":
        {
          List<Object> out = new ArrayList<>();
          for (Object o : Py.iterate(v)) {
            boolean r =
                args.isEmpty()
                    ? Py.truthy(o)
                    : test(Py.str(args.get(0)), o, args.subList(1, args.size()), scope);
            if (r == name.equals("select")) {
              out.add(o);
            }
          }
          return out;
        }
      case "selectattr", "rejectattr":
        {
          List<Object> out = new ArrayList<>();
          String attr = Py.str(args.get(0));
          for (Object o : Py.iterate(v)) {
            Object a = attribute(o, attr);
            boolean r =
                args.size() < 2
                    ? Py.truthy(a)
                    : test(Py.str(args.get(1)), a, args.subList(2, args.size()), scope);
            if (r == name.equals("selectattr")) {
              out.add(o);
            }
          }
          return out;
        }
      case "attr":
        return getattr(v, Py.str(args.get(0)));
      case "indent":
        {
          Object w = arg(args, kw, 0, "width", 4L);
          String pad = w instanceof String s ? s : " ".repeat((int) Py.toLong(w));
          boolean first = Py.truthy(arg(args, kw, 1, "first", false));
          boolean blank = Py.truthy(arg(args, kw, 2, "blank", false));
          String s = Py.str(v);
          String[] lines = s.split("\n", -1);
          StringBuilder sb = new StringBuilder();
          for (int k = 0; k < lines.length; k++) {
            if (k > 0) {
              sb.append('\n');
            }
            String line = lines[k];
            boolean indentIt = k == 0 ? first : (blank || !line.isBlank());
            if (indentIt && !(k == lines.length - 1 && line.isEmpty() && k > 0 && !blank)) {
              sb.append(pad);
            }
            sb.append(line);
          }
          return sb.toString();
        }
      case "wordcount":
        return (long) Py.split(Py.str(v), null, -1).size();
      case "batch":
        {
          long size = Py.toLong(args.get(0));
          List<Object> out = new ArrayList<>();
          List<Object> cur = new ArrayList<>();
          for (Object o : Py.iterate(v)) {
            cur.add(o);
            if (cur.size() == size) {
              out.add(cur);
              cur = new ArrayList<>();
            }
          }
          if (!cur.isEmpty()) {
            if (args.size() > 1) {
              while (cur.size() < size) {
                cur.add(args.get(1));
              }
            }
            out.add(cur);
          }
          return out;
        }
      case "center":
        {
          String s = Py.str(v);
          int width = (int) Py.toLong(arg(args, kw, 0, "width", 80L));
          int padTotal = Math.max(0, width - Py.len(s));
          int left = padTotal / 2 + (padTotal & width & 1);
          return " ".repeat(left) + s + " ".repeat(padTotal - left);
        }
      default:
        throw new ChatTemplateException("chat template error: no filter named '" + name + "'");
    }
  }

  private Object attribute(Object o, String path) {
    Object cur = o;
    for (String part : path.split("\\.")) {
      if (cur instanceof Undefined) {
        return cur;
      }
      if (!part.isEmpty() && part.chars().allMatch(Character::isDigit)) {
        cur = getitem(cur, Long.parseLong(part));
      } else {
        cur = getitem(cur, part);
      }
    }
    return cur;
  }

  private static String escape(String s) {
    StringBuilder sb = new StringBuilder();
    for (int k = 0; k < s.length(); k++) {
      char c = s.charAt(k);
      switch (c) {
        case '&' -> sb.append("&amp;");
        case '<' -> sb.append("&lt;");
        case '>' -> sb.append("&gt;");
        case '"' -> sb.append("&#34;");
        case '\'' -> sb.append("&#39;");
        default -> sb.append(c);
      }
    }
    return sb.toString();
  }
}
