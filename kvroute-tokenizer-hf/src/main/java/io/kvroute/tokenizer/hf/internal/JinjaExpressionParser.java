package io.kvroute.tokenizer.hf.internal;

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
import io.kvroute.tokenizer.hf.internal.JinjaLexer.Kind;
import io.kvroute.tokenizer.hf.internal.JinjaLexer.Token;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * Parses Jinja expressions for {@link JinjaParser}, with jinja2's operator precedence: {@code
 * if-else} &lt; {@code or} &lt; {@code and} &lt; {@code not} &lt; comparisons (including {@code
 * in}) &lt; {@code + -} &lt; {@code ~} &lt; {@code * / // %} &lt; {@code **} &lt; unary {@code -}
 * &lt; postfix ({@code .x}, {@code [i]}, calls) and then filters and tests.
 *
 * <p>Not thread-safe: it reads from, and advances, the parse's {@link TokenCursor}.
 */
final class JinjaExpressionParser {
  private static final Set<String> COMPARE = Set.of("==", "!=", "<", "<=", ">", ">=");

  private final TokenCursor cur;

  JinjaExpressionParser(TokenCursor cur) {
    this.cur = cur;
  }

  /** An expression, or an unparenthesised tuple {@code a, b}. */
  Expr tuple(boolean condExpr) {
    Expr first = expression(condExpr);
    if (!cur.peek().isOp(",")) {
      return first;
    }
    List<Expr> items = new ArrayList<>();
    items.add(first);
    while (cur.skipOp(",")) {
      if (!startsExpression(cur.peek())) {
        break;
      }
      items.add(expression(condExpr));
    }
    return new TupleLit(List.copyOf(items));
  }

  private static boolean startsExpression(Token t) {
    return switch (t.kind()) {
      case NAME, STRING, INT, FLOAT -> true;
      case OP ->
          t.value().equals("(")
              || t.value().equals("[")
              || t.value().equals("{")
              || t.value().equals("-")
              || t.value().equals("+");
      default -> false;
    };
  }

  /** One expression; with {@code condExpr}, {@code a if b else c} is allowed at its top. */
  Expr expression(boolean condExpr) {
    Expr e = or();
    if (condExpr) {
      while (cur.peek().isName("if")) {
        cur.next();
        Expr cond = or();
        Expr otherwise = cur.skipName("else") ? expression(true) : null;
        e = new CondExpr(cond, e, otherwise);
      }
    }
    return e;
  }

  private Expr or() {
    Expr e = and();
    while (cur.skipName("or")) {
      e = new Or(e, and());
    }
    return e;
  }

  private Expr and() {
    Expr e = not();
    while (cur.skipName("and")) {
      e = new And(e, not());
    }
    return e;
  }

  private Expr not() {
    if (cur.skipName("not")) {
      return new Not(not());
    }
    return compare();
  }

  private Expr compare() {
    Expr first = math1();
    List<String> ops = new ArrayList<>();
    List<Expr> rest = new ArrayList<>();
    while (true) {
      Token t = cur.peek();
      if (t.kind() == Kind.OP && COMPARE.contains(t.value())) {
        cur.next();
        ops.add(t.value());
      } else if (t.isName("in")) {
        cur.next();
        ops.add("in");
      } else if (t.isName("not") && cur.peek(1).isName("in")) {
        cur.next();
        cur.next();
        ops.add("notin");
      } else {
        break;
      }
      rest.add(math1());
    }
    return ops.isEmpty() ? first : new Compare(first, List.copyOf(ops), List.copyOf(rest));
  }

  private Expr math1() {
    Expr e = concat();
    while (cur.peek().isOp("+") || cur.peek().isOp("-")) {
      String op = cur.next().value();
      e = new Binary(op, e, concat());
    }
    return e;
  }

  private Expr concat() {
    Expr e = math2();
    if (!cur.peek().isOp("~")) {
      return e;
    }
    List<Expr> parts = new ArrayList<>();
    parts.add(e);
    while (cur.skipOp("~")) {
      parts.add(math2());
    }
    return new Concat(List.copyOf(parts));
  }

  private Expr math2() {
    Expr e = pow();
    while (cur.peek().isOp("*")
        || cur.peek().isOp("/")
        || cur.peek().isOp("//")
        || cur.peek().isOp("%")) {
      String op = cur.next().value();
      e = new Binary(op, e, pow());
    }
    return e;
  }

  private Expr pow() {
    Expr e = unary(true);
    while (cur.skipOp("**")) {
      e = new Binary("**", e, unary(true));
    }
    return e;
  }

  private Expr unary(boolean withFilter) {
    Expr e;
    if (cur.skipOp("-")) {
      e = new Unary("-", unary(false));
    } else if (cur.skipOp("+")) {
      e = new Unary("+", unary(false));
    } else {
      e = primary();
    }
    e = postfix(e);
    if (withFilter) {
      e = filterExpr(e);
    }
    return e;
  }

  private Expr primary() {
    Token t = cur.next();
    switch (t.kind()) {
      case NAME:
        return switch (t.value()) {
          case "true", "True" -> new Const(Boolean.TRUE);
          case "false", "False" -> new Const(Boolean.FALSE);
          case "none", "None" -> new Const(null);
          default -> new Name(t.value());
        };
      case STRING:
        {
          StringBuilder sb = new StringBuilder(t.value());
          while (cur.peek().kind() == Kind.STRING) {
            sb.append(cur.next().value());
          }
          return new Const(sb.toString());
        }
      case INT:
        return new Const(Long.parseLong(t.value()));
      case FLOAT:
        return new Const(Double.parseDouble(t.value()));
      case OP:
        switch (t.value()) {
          case "(":
            {
              if (cur.skipOp(")")) {
                return new TupleLit(List.of());
              }
              Expr e = expression(true);
              if (cur.peek().isOp(",")) {
                List<Expr> items = new ArrayList<>();
                items.add(e);
                while (cur.skipOp(",")) {
                  if (cur.peek().isOp(")")) {
                    break;
                  }
                  items.add(expression(true));
                }
                e = new TupleLit(List.copyOf(items));
              }
              cur.expect(Kind.OP, ")");
              return e;
            }
          case "[":
            {
              List<Expr> items = new ArrayList<>();
              cur.commaSeparated("]", () -> items.add(expression(true)));
              return new ListLit(List.copyOf(items));
            }
          case "{":
            {
              List<Expr> keys = new ArrayList<>();
              List<Expr> values = new ArrayList<>();
              cur.commaSeparated(
                  "}",
                  () -> {
                    keys.add(expression(true));
                    cur.expect(Kind.OP, ":");
                    values.add(expression(true));
                  });
              return new DictLit(List.copyOf(keys), List.copyOf(values));
            }
          default:
            break;
        }
        break;
      default:
        break;
    }
    throw cur.error("unexpected " + t);
  }

  private Expr postfix(Expr e) {
    while (true) {
      if (cur.peek().isOp(".")) {
        cur.next();
        Token t = cur.next();
        if (t.kind() == Kind.NAME) {
          e = new GetAttr(e, t.value());
        } else if (t.kind() == Kind.INT) {
          e = new GetItem(e, new Const(Long.parseLong(t.value())));
        } else {
          throw cur.error("expected an attribute name after '.', got " + t);
        }
      } else if (cur.peek().isOp("[")) {
        cur.next();
        e = subscript(e);
      } else if (cur.peek().isOp("(")) {
        e = call(e);
      } else {
        return e;
      }
    }
  }

  private Expr subscript(Expr e) {
    Expr start = null;
    Expr stop = null;
    Expr step = null;
    boolean slice = false;
    if (!cur.peek().isOp(":")) {
      start = expression(true);
    }
    if (cur.skipOp(":")) {
      slice = true;
      if (!cur.peek().isOp(":") && !cur.peek().isOp("]")) {
        stop = expression(true);
      }
      if (cur.skipOp(":")) {
        if (!cur.peek().isOp("]")) {
          step = expression(true);
        }
      }
    }
    cur.expect(Kind.OP, "]");
    return slice ? new Slice(e, start, stop, step) : new GetItem(e, start);
  }

  private Call call(Expr fn) {
    cur.expect(Kind.OP, "(");
    List<Expr> args = new ArrayList<>();
    List<String> kwNames = new ArrayList<>();
    List<Expr> kwValues = new ArrayList<>();
    cur.commaSeparated(
        ")",
        () -> {
          if (cur.peek().kind() == Kind.NAME && cur.peek(1).isOp("=")) {
            kwNames.add(cur.next().value());
            cur.next();
            kwValues.add(expression(true));
          } else {
            if (!kwNames.isEmpty()) {
              throw cur.error("positional argument after keyword argument");
            }
            args.add(expression(true));
          }
        });
    return new Call(fn, List.copyOf(args), List.copyOf(kwNames), List.copyOf(kwValues));
  }

  /** A filter's name (dotted names allowed) and its optional arguments, after {@code |}. */
  FilterCall filterCall() {
    String name = dottedName();
    if (cur.peek().isOp("(")) {
      Call c = call(new Name(name));
      return new FilterCall(name, c.args(), c.kwNames(), c.kwValues());
    }
    return new FilterCall(name, List.of(), List.of(), List.of());
  }

  /** A filter's or test's name: {@code name} or {@code a.b}. */
  private String dottedName() {
    String name = cur.expect(Kind.NAME, null).value();
    while (cur.peek().isOp(".")) {
      cur.next();
      name = name + "." + cur.expect(Kind.NAME, null).value();
    }
    return name;
  }

  private Expr filterExpr(Expr e) {
    while (true) {
      if (cur.skipOp("|")) {
        e = new Filter(e, filterCall());
        e = postfix(e);
      } else if (cur.peek().isName("is")) {
        cur.next();
        boolean negated = cur.skipName("not");
        String name = dottedName();
        List<Expr> args = new ArrayList<>();
        if (cur.peek().isOp("(")) {
          Call c = call(new Name(name));
          args.addAll(c.args());
          args.addAll(c.kwValues());
        } else if (startsTestArgument(cur.peek())) {
          args.add(primaryWithPostfix());
        }
        e = new Test(e, name, List.copyOf(args), negated);
      } else {
        return e;
      }
    }
  }

  private static boolean startsTestArgument(Token t) {
    switch (t.kind()) {
      case STRING, INT, FLOAT:
        return true;
      case NAME:
        return !Set.of("else", "or", "and", "if", "in", "not", "is").contains(t.value());
      case OP:
        return t.value().equals("[") || t.value().equals("{") || t.value().equals("-");
      default:
        return false;
    }
  }

  private Expr primaryWithPostfix() {
    if (cur.skipOp("-")) {
      return new Unary("-", postfix(primary()));
    }
    return postfix(primary());
  }
}
