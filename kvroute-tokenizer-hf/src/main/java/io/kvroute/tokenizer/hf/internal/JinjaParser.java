package io.kvroute.tokenizer.hf.internal;

import io.kvroute.tokenizer.hf.ChatTemplateException;
import io.kvroute.tokenizer.hf.internal.JinjaLexer.Kind;
import io.kvroute.tokenizer.hf.internal.JinjaLexer.Token;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * Parses {@link JinjaLexer} tokens into an immutable syntax tree, with jinja2's operator
 * precedence: {@code if-else} &lt; {@code or} &lt; {@code and} &lt; {@code not} &lt; comparisons
 * (including {@code in}) &lt; {@code + -} &lt; {@code ~} &lt; {@code * / // %} &lt; {@code **} &lt;
 * unary {@code -} &lt; postfix ({@code .x}, {@code [i]}, calls) and then filters and tests.
 *
 * <p>Supported statements: {@code if/elif/else}, {@code for} (with tuple targets, an {@code if}
 * filter and {@code else}), {@code set} (names, tuples, {@code ns.attr}, block form), {@code
 * macro}, {@code call}, {@code filter}, {@code break}, {@code continue} (jinja2's loopcontrols) and
 * {@code generation} (transformers' assistant-mask marker, rendered as its body).
 */
final class JinjaParser {

  // ------------------------------------------------------------------ syntax tree

  /** A statement or template fragment. */
  sealed interface Node {}

  /** An expression. */
  sealed interface Expr {}

  record Text(String text) implements Node {}

  record Output(Expr expr) implements Node {}

  record If(List<Expr> conditions, List<List<Node>> bodies, List<Node> otherwise) implements Node {}

  record For(Target target, Expr iterable, Expr filter, List<Node> body, List<Node> otherwise)
      implements Node {}

  record SetVar(Target target, Expr value) implements Node {}

  record SetBlock(Target target, List<Node> body, List<FilterCall> filters) implements Node {}

  record Macro(String name, List<String> params, List<Expr> defaults, List<Node> body)
      implements Node {}

  record CallBlock(Call call, List<String> params, List<Expr> defaults, List<Node> body)
      implements Node {}

  record FilterBlock(List<FilterCall> filters, List<Node> body) implements Node {}

  record Break() implements Node {}

  record Continue() implements Node {}

  /** An assignment target. */
  sealed interface Target {}

  record NameTarget(String name) implements Target {}

  record AttrTarget(String object, String attr) implements Target {}

  record TupleTarget(List<Target> items) implements Target {}

  record Const(Object value) implements Expr {}

  record Name(String name) implements Expr {}

  record ListLit(List<Expr> items) implements Expr {}

  record TupleLit(List<Expr> items) implements Expr {}

  record DictLit(List<Expr> keys, List<Expr> values) implements Expr {}

  record GetAttr(Expr object, String name) implements Expr {}

  record GetItem(Expr object, Expr key) implements Expr {}

  record Slice(Expr object, Expr start, Expr stop, Expr step) implements Expr {}

  record Call(Expr fn, List<Expr> args, List<String> kwNames, List<Expr> kwValues)
      implements Expr {}

  record FilterCall(String name, List<Expr> args, List<String> kwNames, List<Expr> kwValues) {}

  record Filter(Expr value, FilterCall filter) implements Expr {}

  record Test(Expr value, String name, List<Expr> args, boolean negated) implements Expr {}

  record Binary(String op, Expr left, Expr right) implements Expr {}

  record Unary(String op, Expr operand) implements Expr {}

  record And(Expr left, Expr right) implements Expr {}

  record Or(Expr left, Expr right) implements Expr {}

  record Not(Expr operand) implements Expr {}

  record Compare(Expr first, List<String> ops, List<Expr> rest) implements Expr {}

  record CondExpr(Expr condition, Expr then, Expr otherwise) implements Expr {}

  record Concat(List<Expr> parts) implements Expr {}

  // ------------------------------------------------------------------ parser

  private static final Set<String> COMPARE = Set.of("==", "!=", "<", "<=", ">", ">=");

  private final List<Token> tokens;
  private int i;

  private JinjaParser(List<Token> tokens) {
    this.tokens = tokens;
  }

  /** Parses a template's tokens. */
  static List<Node> parse(List<Token> tokens) {
    JinjaParser p = new JinjaParser(tokens);
    List<Node> body = p.subparse(Set.of());
    if (p.peek().kind() != Kind.EOF) {
      throw p.error("unexpected '" + p.peekBlockName() + "'");
    }
    return body;
  }

  private Token peek() {
    return tokens.get(i);
  }

  private Token peek(int ahead) {
    return tokens.get(Math.min(i + ahead, tokens.size() - 1));
  }

  private Token next() {
    return tokens.get(i++);
  }

  private Token expect(Kind kind, String value) {
    Token t = next();
    if (t.kind() != kind || (value != null && !t.value().equals(value))) {
      throw error("expected " + (value != null ? "'" + value + "'" : kind) + ", got " + t);
    }
    return t;
  }

  private boolean skipOp(String op) {
    if (peek().isOp(op)) {
      i++;
      return true;
    }
    return false;
  }

  private boolean skipName(String name) {
    if (peek().isName(name)) {
      i++;
      return true;
    }
    return false;
  }

  private String peekBlockName() {
    Token t = peek(1);
    return t.kind() == Kind.NAME ? t.value() : t.toString();
  }

  /** Parses nodes until a block tag whose first word is in {@code ends} (not consumed). */
  private List<Node> subparse(Set<String> ends) {
    List<Node> body = new ArrayList<>();
    while (true) {
      Token t = peek();
      switch (t.kind()) {
        case EOF -> {
          if (!ends.isEmpty()) {
            throw error("unexpected end of template, expected one of " + ends);
          }
          return body;
        }
        case TEXT -> {
          next();
          body.add(new Text(t.value()));
        }
        case VAR_BEGIN -> {
          next();
          Expr e = tuple(true);
          expect(Kind.VAR_END, null);
          body.add(new Output(e));
        }
        case BLOCK_BEGIN -> {
          Token name = peek(1);
          if (name.kind() != Kind.NAME) {
            throw error("expected a statement name, got " + name);
          }
          if (ends.contains(name.value())) {
            return body;
          }
          next();
          next();
          body.add(statement(name.value()));
        }
        default -> throw error("unexpected " + t);
      }
    }
  }

  private void endTag() {
    expect(Kind.BLOCK_END, null);
  }

  private void endBlock(String name) {
    expect(Kind.BLOCK_BEGIN, null);
    expect(Kind.NAME, name);
    endTag();
  }

  private Node statement(String name) {
    switch (name) {
      case "if":
        return ifStatement();
      case "for":
        return forStatement();
      case "set":
        return setStatement();
      case "macro":
        return macroStatement();
      case "call":
        return callStatement();
      case "filter":
        {
          List<FilterCall> filters = filterChain();
          endTag();
          List<Node> body = subparse(Set.of("endfilter"));
          endBlock("endfilter");
          return new FilterBlock(filters, body);
        }
      case "break":
        endTag();
        return new Break();
      case "continue":
        endTag();
        return new Continue();
      case "generation":
        {
          endTag();
          List<Node> body = subparse(Set.of("endgeneration"));
          endBlock("endgeneration");
          return new If(List.of(new Const(Boolean.TRUE)), List.of(body), List.of());
        }
      default:
        throw error("unknown statement '" + name + "'");
    }
  }

  private Node ifStatement() {
    List<Expr> conds = new ArrayList<>();
    List<List<Node>> bodies = new ArrayList<>();
    conds.add(tuple(true));
    endTag();
    while (true) {
      bodies.add(subparse(Set.of("elif", "else", "endif")));
      expect(Kind.BLOCK_BEGIN, null);
      String word = expect(Kind.NAME, null).value();
      if (word.equals("elif")) {
        conds.add(tuple(true));
        endTag();
      } else if (word.equals("else")) {
        endTag();
        List<Node> otherwise = subparse(Set.of("endif"));
        endBlock("endif");
        return new If(conds, bodies, otherwise);
      } else {
        endTag();
        return new If(conds, bodies, List.of());
      }
    }
  }

  private Node forStatement() {
    Target target = assignTarget(true);
    expect(Kind.NAME, "in");
    Expr iter = tuple(false);
    Expr filter = null;
    if (skipName("if")) {
      filter = tuple(true);
    }
    if (skipName("recursive")) {
      throw error("recursive for loops are not supported");
    }
    endTag();
    List<Node> body = subparse(Set.of("endfor", "else"));
    List<Node> otherwise = List.of();
    expect(Kind.BLOCK_BEGIN, null);
    if (next().value().equals("else")) {
      endTag();
      otherwise = subparse(Set.of("endfor"));
      endBlock("endfor");
    } else {
      endTag();
    }
    return new For(target, iter, filter, body, otherwise);
  }

  private Node setStatement() {
    Target target = assignTarget(true);
    if (skipOp("=")) {
      Expr value = tuple(true);
      endTag();
      return new SetVar(target, value);
    }
    List<FilterCall> filters = peek().isOp("|") ? filterChain() : List.of();
    endTag();
    List<Node> body = subparse(Set.of("endset"));
    endBlock("endset");
    return new SetBlock(target, body, filters);
  }

  private List<FilterCall> filterChain() {
    List<FilterCall> out = new ArrayList<>();
    if (peek().kind() == Kind.NAME) {
      out.add(filterCall());
    }
    while (skipOp("|")) {
      out.add(filterCall());
    }
    return out;
  }

  private Node macroStatement() {
    String name = expect(Kind.NAME, null).value();
    List<String> params = new ArrayList<>();
    List<Expr> defaults = new ArrayList<>();
    signature(params, defaults);
    endTag();
    List<Node> body = subparse(Set.of("endmacro"));
    endBlock("endmacro");
    return new Macro(name, params, defaults, body);
  }

  private void signature(List<String> params, List<Expr> defaults) {
    expect(Kind.OP, "(");
    while (!skipOp(")")) {
      if (!params.isEmpty()) {
        expect(Kind.OP, ",");
        if (skipOp(")")) {
          break;
        }
      }
      params.add(expect(Kind.NAME, null).value());
      defaults.add(skipOp("=") ? expression(true) : null);
    }
  }

  private Node callStatement() {
    List<String> params = new ArrayList<>();
    List<Expr> defaults = new ArrayList<>();
    if (peek().isOp("(")) {
      signature(params, defaults);
    }
    Expr e = expression(true);
    if (!(e instanceof Call c)) {
      throw error("expected a macro call after 'call'");
    }
    endTag();
    List<Node> body = subparse(Set.of("endcall"));
    endBlock("endcall");
    return new CallBlock(c, params, defaults, body);
  }

  private Target assignTarget(boolean allowTuple) {
    List<Target> items = new ArrayList<>();
    boolean tuple = false;
    while (true) {
      Target t;
      if (skipOp("(")) {
        t = assignTarget(true);
        expect(Kind.OP, ")");
      } else {
        String n = expect(Kind.NAME, null).value();
        if (skipOp(".")) {
          t = new AttrTarget(n, expect(Kind.NAME, null).value());
        } else {
          t = new NameTarget(n);
        }
      }
      items.add(t);
      if (allowTuple && peek().isOp(",")) {
        next();
        tuple = true;
        if (!(peek().kind() == Kind.NAME || peek().isOp("("))) {
          break;
        }
        continue;
      }
      break;
    }
    return tuple ? new TupleTarget(List.copyOf(items)) : items.get(0);
  }

  // ------------------------------------------------------------------ expressions

  /** An expression, or an unparenthesised tuple {@code a, b}. */
  private Expr tuple(boolean condExpr) {
    Expr first = expression(condExpr);
    if (!peek().isOp(",")) {
      return first;
    }
    List<Expr> items = new ArrayList<>();
    items.add(first);
    while (skipOp(",")) {
      if (!startsExpression(peek())) {
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

  private Expr expression(boolean condExpr) {
    Expr e = or();
    if (condExpr) {
      while (peek().isName("if")) {
        next();
        Expr cond = or();
        Expr otherwise = skipName("else") ? expression(true) : null;
        e = new CondExpr(cond, e, otherwise);
      }
    }
    return e;
  }

  private Expr or() {
    Expr e = and();
    while (skipName("or")) {
      e = new Or(e, and());
    }
    return e;
  }

  private Expr and() {
    Expr e = not();
    while (skipName("and")) {
      e = new And(e, not());
    }
    return e;
  }

  private Expr not() {
    if (skipName("not")) {
      return new Not(not());
    }
    return compare();
  }

  private Expr compare() {
    Expr first = math1();
    List<String> ops = new ArrayList<>();
    List<Expr> rest = new ArrayList<>();
    while (true) {
      Token t = peek();
      if (t.kind() == Kind.OP && COMPARE.contains(t.value())) {
        next();
        ops.add(t.value());
      } else if (t.isName("in")) {
        next();
        ops.add("in");
      } else if (t.isName("not") && peek(1).isName("in")) {
        next();
        next();
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
    while (peek().isOp("+") || peek().isOp("-")) {
      String op = next().value();
      e = new Binary(op, e, concat());
    }
    return e;
  }

  private Expr concat() {
    Expr e = math2();
    if (!peek().isOp("~")) {
      return e;
    }
    List<Expr> parts = new ArrayList<>();
    parts.add(e);
    while (skipOp("~")) {
      parts.add(math2());
    }
    return new Concat(List.copyOf(parts));
  }

  private Expr math2() {
    Expr e = pow();
    while (peek().isOp("*") || peek().isOp("/") || peek().isOp("//") || peek().isOp("%")) {
      String op = next().value();
      e = new Binary(op, e, pow());
    }
    return e;
  }

  private Expr pow() {
    Expr e = unary(true);
    while (skipOp("**")) {
      e = new Binary("**", e, unary(true));
    }
    return e;
  }

  private Expr unary(boolean withFilter) {
    Expr e;
    if (skipOp("-")) {
      e = new Unary("-", unary(false));
    } else if (skipOp("+")) {
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
    Token t = next();
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
          while (peek().kind() == Kind.STRING) {
            sb.append(next().value());
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
              if (skipOp(")")) {
                return new TupleLit(List.of());
              }
              Expr e = expression(true);
              if (peek().isOp(",")) {
                List<Expr> items = new ArrayList<>();
                items.add(e);
                while (skipOp(",")) {
                  if (peek().isOp(")")) {
                    break;
                  }
                  items.add(expression(true));
                }
                e = new TupleLit(List.copyOf(items));
              }
              expect(Kind.OP, ")");
              return e;
            }
          case "[":
            {
              List<Expr> items = new ArrayList<>();
              while (!skipOp("]")) {
                if (!items.isEmpty()) {
                  expect(Kind.OP, ",");
                  if (skipOp("]")) {
                    break;
                  }
                }
                items.add(expression(true));
              }
              return new ListLit(List.copyOf(items));
            }
          case "{":
            {
              List<Expr> keys = new ArrayList<>();
              List<Expr> values = new ArrayList<>();
              while (!skipOp("}")) {
                if (!keys.isEmpty()) {
                  expect(Kind.OP, ",");
                  if (skipOp("}")) {
                    break;
                  }
                }
                keys.add(expression(true));
                expect(Kind.OP, ":");
                values.add(expression(true));
              }
              return new DictLit(List.copyOf(keys), List.copyOf(values));
            }
          default:
            break;
        }
        break;
      default:
        break;
    }
    throw error("unexpected " + t);
  }

  private Expr postfix(Expr e) {
    while (true) {
      if (peek().isOp(".")) {
        next();
        Token t = next();
        if (t.kind() == Kind.NAME) {
          e = new GetAttr(e, t.value());
        } else if (t.kind() == Kind.INT) {
          e = new GetItem(e, new Const(Long.parseLong(t.value())));
        } else {
          throw error("expected an attribute name after '.', got " + t);
        }
      } else if (peek().isOp("[")) {
        next();
        e = subscript(e);
      } else if (peek().isOp("(")) {
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
    if (!peek().isOp(":")) {
      start = expression(true);
    }
    if (skipOp(":")) {
      slice = true;
      if (!peek().isOp(":") && !peek().isOp("]")) {
        stop = expression(true);
      }
      if (skipOp(":")) {
        if (!peek().isOp("]")) {
          step = expression(true);
        }
      }
    }
    expect(Kind.OP, "]");
    return slice ? new Slice(e, start, stop, step) : new GetItem(e, start);
  }

  private Call call(Expr fn) {
    expect(Kind.OP, "(");
    List<Expr> args = new ArrayList<>();
    List<String> kwNames = new ArrayList<>();
    List<Expr> kwValues = new ArrayList<>();
    boolean first = true;
    while (!skipOp(")")) {
      if (!first) {
        expect(Kind.OP, ",");
        if (skipOp(")")) {
          break;
        }
      }
      first = false;
      if (peek().kind() == Kind.NAME && peek(1).isOp("=")) {
        kwNames.add(next().value());
        next();
        kwValues.add(expression(true));
      } else {
        if (!kwNames.isEmpty()) {
          throw error("positional argument after keyword argument");
        }
        args.add(expression(true));
      }
    }
    return new Call(fn, List.copyOf(args), List.copyOf(kwNames), List.copyOf(kwValues));
  }

  private FilterCall filterCall() {
    String name = expect(Kind.NAME, null).value();
    while (peek().isOp(".")) {
      next();
      name = name + "." + expect(Kind.NAME, null).value();
    }
    if (peek().isOp("(")) {
      Call c = call(new Name(name));
      return new FilterCall(name, c.args(), c.kwNames(), c.kwValues());
    }
    return new FilterCall(name, List.of(), List.of(), List.of());
  }

  private Expr filterExpr(Expr e) {
    while (true) {
      if (skipOp("|")) {
        e = new Filter(e, filterCall());
        e = postfix(e);
      } else if (peek().isName("is")) {
        next();
        boolean negated = skipName("not");
        String name = expect(Kind.NAME, null).value();
        while (peek().isOp(".")) {
          next();
          name = name + "." + expect(Kind.NAME, null).value();
        }
        List<Expr> args = new ArrayList<>();
        if (peek().isOp("(")) {
          Call c = call(new Name(name));
          args.addAll(c.args());
          args.addAll(c.kwValues());
        } else if (startsTestArgument(peek())) {
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
    if (skipOp("-")) {
      return new Unary("-", postfix(primary()));
    }
    return postfix(primary());
  }

  private ChatTemplateException error(String message) {
    int line = peek().line();
    return new ChatTemplateException("chat template syntax error at line " + line + ": " + message);
  }
}
