package io.kvroute.tokenizer.hf.internal;

import io.kvroute.tokenizer.hf.ChatTemplateException;
import io.kvroute.tokenizer.hf.internal.JinjaAst.And;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Binary;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Call;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Compare;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Concat;
import io.kvroute.tokenizer.hf.internal.JinjaAst.CondExpr;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Const;
import io.kvroute.tokenizer.hf.internal.JinjaAst.DictLit;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Expr;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Filter;
import io.kvroute.tokenizer.hf.internal.JinjaAst.FilterCall;
import io.kvroute.tokenizer.hf.internal.JinjaAst.GetAttr;
import io.kvroute.tokenizer.hf.internal.JinjaAst.GetItem;
import io.kvroute.tokenizer.hf.internal.JinjaAst.ListLit;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Name;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Not;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Or;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Slice;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Test;
import io.kvroute.tokenizer.hf.internal.JinjaAst.TupleLit;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Unary;
import io.kvroute.tokenizer.hf.internal.JinjaRuntime.Fn;
import io.kvroute.tokenizer.hf.internal.JinjaRuntime.Loop;
import io.kvroute.tokenizer.hf.internal.JinjaRuntime.Namespace;
import io.kvroute.tokenizer.hf.internal.Py.Undefined;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Evaluates {@link JinjaAst} expressions with jinja2's semantics: operators through {@link Py},
 * filters through {@link JinjaFilters}, tests through {@link JinjaTests}, and attribute and item
 * access ({@code x.name}, {@code x[key]}) with the Python methods of {@link PyMethods}.
 *
 * <p>Stateless and thread-safe; the state of a render is in its {@link JinjaScope}s.
 */
final class JinjaEval {
  private JinjaEval() {}

  /** The value of {@code e} in {@code scope}. */
  static Object eval(Expr e, JinjaScope scope) {
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
      return evalAll(l.items(), scope);
    }
    if (e instanceof TupleLit l) {
      return Collections.unmodifiableList(evalAll(l.items(), scope));
    }
    if (e instanceof DictLit d) {
      Map<Object, Object> out = new LinkedHashMap<>();
      for (int k = 0; k < d.keys().size(); k++) {
        out.put(eval(d.keys().get(k), scope), eval(d.values().get(k), scope));
      }
      return out;
    }
    if (e instanceof Call c) {
      List<Object> args = evalAll(c.args(), scope);
      Map<String, Object> kw = evalKeywords(c.kwNames(), c.kwValues(), scope);
      Object fn = eval(c.fn(), scope);
      return callValue(fn, args, kw);
    }
    if (e instanceof Filter f) {
      return applyFilter(f.filter(), eval(f.value(), scope), scope);
    }
    if (e instanceof Test t) {
      Object v = eval(t.value(), scope);
      List<Object> args = evalAll(t.args(), scope);
      boolean r = JinjaTests.test(t.name(), v, args);
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

  /** The values of {@code exprs}, in order, in a new mutable list. */
  static List<Object> evalAll(List<Expr> exprs, JinjaScope scope) {
    List<Object> out = new ArrayList<>(exprs.size());
    for (Expr x : exprs) {
      out.add(eval(x, scope));
    }
    return out;
  }

  /** Keyword arguments: each name with its value, in call order. */
  static Map<String, Object> evalKeywords(List<String> names, List<Expr> values, JinjaScope scope) {
    Map<String, Object> kw = new LinkedHashMap<>();
    for (int k = 0; k < names.size(); k++) {
      kw.put(names.get(k), eval(values.get(k), scope));
    }
    return kw;
  }

  /** {@code value | name(args...)}. */
  static Object applyFilter(FilterCall fc, Object v, JinjaScope scope) {
    return JinjaFilters.filter(
        fc.name(), v, evalAll(fc.args(), scope), evalKeywords(fc.kwNames(), fc.kwValues(), scope));
  }

  /** Calls a template value: a macro, a global or a bound method. */
  static Object callValue(Object fn, List<Object> args, Map<String, Object> kw) {
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
  static Object getattr(Object obj, String name) {
    if (obj instanceof Undefined u) {
      throw u.error();
    }
    if (obj instanceof Namespace ns) {
      return ns.attrs.containsKey(name) ? ns.attrs.get(name) : new Undefined(name);
    }
    if (obj instanceof Loop loop) {
      return loop.attr(name);
    }
    Object method = PyMethods.method(obj, name);
    if (method != null) {
      return method;
    }
    if (obj instanceof Map<?, ?> m) {
      return m.containsKey(name) ? m.get(name) : new Undefined(name);
    }
    return new Undefined(name);
  }

  /** {@code obj[key]}: items first, then attributes (jinja2's {@code getitem}). */
  static Object getitem(Object obj, Object key) {
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
        Object method = PyMethods.method(obj, s);
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
        Object method = PyMethods.method(obj, s);
        return method != null ? method : new Undefined(s);
      }
    }
    if (key instanceof String s) {
      return getattr(obj, s);
    }
    return new Undefined(Py.str(key));
  }
}
