package io.kvroute.tokenizer.hf.internal;

import io.kvroute.tokenizer.hf.internal.JinjaAst.AttrTarget;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Break;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Call;
import io.kvroute.tokenizer.hf.internal.JinjaAst.CallBlock;
import io.kvroute.tokenizer.hf.internal.JinjaAst.Const;
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
import io.kvroute.tokenizer.hf.internal.JinjaLexer.Kind;
import io.kvroute.tokenizer.hf.internal.JinjaLexer.Token;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * Parses {@link JinjaLexer} tokens into a {@link JinjaAst} syntax tree: the statements here, the
 * expressions in {@link JinjaExpressionParser}.
 *
 * <p>Supported statements: {@code if/elif/else}, {@code for} (with tuple targets, an {@code if}
 * filter and {@code else}), {@code set} (names, tuples, {@code ns.attr}, block form), {@code
 * macro}, {@code call}, {@code filter}, {@code break}, {@code continue} (jinja2's loopcontrols) and
 * {@code generation} (transformers' assistant-mask marker, rendered as its body).
 *
 * <p>Not thread-safe; {@link #parse} makes a new instance for each template.
 */
final class JinjaParser {
  private final TokenCursor cur;
  private final JinjaExpressionParser expr;

  private JinjaParser(List<Token> tokens) {
    this.cur = new TokenCursor(tokens);
    this.expr = new JinjaExpressionParser(cur);
  }

  /** Parses a template's tokens. */
  static List<Node> parse(List<Token> tokens) {
    JinjaParser p = new JinjaParser(tokens);
    List<Node> body = p.subparse(Set.of());
    if (p.cur.peek().kind() != Kind.EOF) {
      throw p.cur.error("unexpected '" + p.peekBlockName() + "'");
    }
    return body;
  }

  private String peekBlockName() {
    Token t = cur.peek(1);
    return t.kind() == Kind.NAME ? t.value() : t.toString();
  }

  /** Parses nodes until a block tag whose first word is in {@code ends} (not consumed). */
  private List<Node> subparse(Set<String> ends) {
    List<Node> body = new ArrayList<>();
    while (true) {
      Token t = cur.peek();
      switch (t.kind()) {
        case EOF -> {
          if (!ends.isEmpty()) {
            throw cur.error("unexpected end of template, expected one of " + ends);
          }
          return body;
        }
        case TEXT -> {
          cur.next();
          body.add(new Text(t.value()));
        }
        case VAR_BEGIN -> {
          cur.next();
          Expr e = expr.tuple(true);
          cur.expect(Kind.VAR_END, null);
          body.add(new Output(e));
        }
        case BLOCK_BEGIN -> {
          Token name = cur.peek(1);
          if (name.kind() != Kind.NAME) {
            throw cur.error("expected a statement name, got " + name);
          }
          if (ends.contains(name.value())) {
            return body;
          }
          cur.next();
          cur.next();
          body.add(statement(name.value()));
        }
        default -> throw cur.error("unexpected " + t);
      }
    }
  }

  private void endTag() {
    cur.expect(Kind.BLOCK_END, null);
  }

  private void endBlock(String name) {
    cur.expect(Kind.BLOCK_BEGIN, null);
    cur.expect(Kind.NAME, name);
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
        throw cur.error("unknown statement '" + name + "'");
    }
  }

  private Node ifStatement() {
    List<Expr> conds = new ArrayList<>();
    List<List<Node>> bodies = new ArrayList<>();
    conds.add(expr.tuple(true));
    endTag();
    while (true) {
      bodies.add(subparse(Set.of("elif", "else", "endif")));
      cur.expect(Kind.BLOCK_BEGIN, null);
      String word = cur.expect(Kind.NAME, null).value();
      if (word.equals("elif")) {
        conds.add(expr.tuple(true));
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
    cur.expect(Kind.NAME, "in");
    Expr iter = expr.tuple(false);
    Expr filter = null;
    if (cur.skipName("if")) {
      filter = expr.tuple(true);
    }
    if (cur.skipName("recursive")) {
      throw cur.error("recursive for loops are not supported");
    }
    endTag();
    List<Node> body = subparse(Set.of("endfor", "else"));
    List<Node> otherwise = List.of();
    cur.expect(Kind.BLOCK_BEGIN, null);
    if (cur.next().value().equals("else")) {
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
    if (cur.skipOp("=")) {
      Expr value = expr.tuple(true);
      endTag();
      return new SetVar(target, value);
    }
    List<FilterCall> filters = cur.peek().isOp("|") ? filterChain() : List.of();
    endTag();
    List<Node> body = subparse(Set.of("endset"));
    endBlock("endset");
    return new SetBlock(target, body, filters);
  }

  private List<FilterCall> filterChain() {
    List<FilterCall> out = new ArrayList<>();
    if (cur.peek().kind() == Kind.NAME) {
      out.add(expr.filterCall());
    }
    while (cur.skipOp("|")) {
      out.add(expr.filterCall());
    }
    return out;
  }

  private Node macroStatement() {
    String name = cur.expect(Kind.NAME, null).value();
    List<String> params = new ArrayList<>();
    List<Expr> defaults = new ArrayList<>();
    signature(params, defaults);
    endTag();
    List<Node> body = subparse(Set.of("endmacro"));
    endBlock("endmacro");
    return new Macro(name, params, defaults, body);
  }

  private void signature(List<String> params, List<Expr> defaults) {
    cur.expect(Kind.OP, "(");
    cur.commaSeparated(
        ")",
        () -> {
          params.add(cur.expect(Kind.NAME, null).value());
          defaults.add(cur.skipOp("=") ? expr.expression(true) : null);
        });
  }

  private Node callStatement() {
    List<String> params = new ArrayList<>();
    List<Expr> defaults = new ArrayList<>();
    if (cur.peek().isOp("(")) {
      signature(params, defaults);
    }
    Expr e = expr.expression(true);
    if (!(e instanceof Call c)) {
      throw cur.error("expected a macro call after 'call'");
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
      if (cur.skipOp("(")) {
        t = assignTarget(true);
        cur.expect(Kind.OP, ")");
      } else {
        String n = cur.expect(Kind.NAME, null).value();
        if (cur.skipOp(".")) {
          t = new AttrTarget(n, cur.expect(Kind.NAME, null).value());
        } else {
          t = new NameTarget(n);
        }
      }
      items.add(t);
      if (allowTuple && cur.peek().isOp(",")) {
        cur.next();
        tuple = true;
        if (!(cur.peek().kind() == Kind.NAME || cur.peek().isOp("("))) {
          break;
        }
        continue;
      }
      break;
    }
    return tuple ? new TupleTarget(List.copyOf(items)) : items.get(0);
  }
}
