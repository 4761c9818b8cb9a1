package io.kvroute.tokenizer.hf.internal;

import io.kvroute.tokenizer.hf.ChatTemplateException;
import io.kvroute.tokenizer.hf.internal.JinjaLexer.Kind;
import io.kvroute.tokenizer.hf.internal.JinjaLexer.Token;
import java.util.List;

/**
 * A position in a template's {@link JinjaLexer} tokens, shared by {@link JinjaParser} (statements)
 * and {@link JinjaExpressionParser}: look ahead, consume, expect, and report a syntax error at the
 * current line.
 *
 * <p>Not thread-safe: one parse owns one cursor.
 */
final class TokenCursor {
  private final List<Token> tokens;
  private int i;

  TokenCursor(List<Token> tokens) {
    this.tokens = tokens;
  }

  Token peek() {
    return tokens.get(i);
  }

  Token peek(int ahead) {
    return tokens.get(Math.min(i + ahead, tokens.size() - 1));
  }

  Token next() {
    return tokens.get(i++);
  }

  Token expect(Kind kind, String value) {
    Token t = next();
    if (t.kind() != kind || (value != null && !t.value().equals(value))) {
      throw error("expected " + (value != null ? "'" + value + "'" : kind) + ", got " + t);
    }
    return t;
  }

  boolean skipOp(String op) {
    if (peek().isOp(op)) {
      i++;
      return true;
    }
    return false;
  }

  boolean skipName(String name) {
    if (peek().isName(name)) {
      i++;
      return true;
    }
    return false;
  }

  /**
   * Runs {@code item} for each element of a comma-separated list up to the operator {@code close}
   * (consumed), allowing a trailing comma: the rest of {@code [a, b,]}, {@code f(x, y=1)}.
   */
  void commaSeparated(String close, Runnable item) {
    boolean first = true;
    while (!skipOp(close)) {
      if (!first) {
        expect(Kind.OP, ",");
        if (skipOp(close)) {
          break;
        }
      }
      first = false;
      item.run();
    }
  }

  ChatTemplateException error(String message) {
    int line = peek().line();
    return new ChatTemplateException("chat template syntax error at line " + line + ": " + message);
  }
}
