package io.kvroute.tokenizer.hf.internal;

import java.util.List;

/**
 * The syntax tree {@link JinjaParser} builds and {@link JinjaRuntime} walks: statements ({@link
 * Node}), expressions ({@link Expr}) and assignment targets ({@link Target}), all records.
 *
 * <p>Thread-safe once built: records of lists that nothing changes after the parser returns.
 */
final class JinjaAst {
  private JinjaAst() {}

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
}
