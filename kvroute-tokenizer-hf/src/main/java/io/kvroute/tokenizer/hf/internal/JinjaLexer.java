package io.kvroute.tokenizer.hf.internal;

import io.kvroute.tokenizer.hf.ChatTemplateException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;

/**
 * Splits a Jinja template into tokens with the whitespace rules Hugging Face chat templates are
 * written for: jinja2's {@code trim_blocks=True} and {@code lstrip_blocks=True} (as transformers
 * and vLLM configure the environment), {@code {%- -%}} / {@code {{- -}}} / {@code {#- -#}}
 * stripping and {@code {%+ +%}} preservation, and {@code {% raw %}} blocks.
 *
 * <p>Stateless; {@link #tokenize} is thread-safe.
 */
final class JinjaLexer {

  /** Token kinds. */
  enum Kind {
    TEXT,
    VAR_BEGIN,
    VAR_END,
    BLOCK_BEGIN,
    BLOCK_END,
    NAME,
    STRING,
    INT,
    FLOAT,
    OP,
    EOF
  }

  /** One token: its kind, its text (the decoded value for strings) and its source line. */
  record Token(Kind kind, String value, int line) {
    boolean is(Kind k, String v) {
      return kind == k && value.equals(v);
    }

    boolean isName(String v) {
      return kind == Kind.NAME && value.equals(v);
    }

    boolean isOp(String v) {
      return kind == Kind.OP && value.equals(v);
    }

    @Override
    public String toString() {
      return kind + "(" + value + ")@" + line;
    }
  }

  private static final String[] OPS = {
    "//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=", "(", ")", "[",
    "]", "{", "}", ",", ".", ":", "|", ";"
  };

  private final String src;
  private final List<Token> out = new ArrayList<>();
  private int pos;
  private int line = 1;
  private boolean lineStarting = true;

  private JinjaLexer(String src) {
    this.src = src;
  }

  /** Tokenizes a whole template. */
  static List<Token> tokenize(String template) {
    JinjaLexer l = new JinjaLexer(template);
    l.run();
    return l.out;
  }

  private void run() {
    while (pos < src.length()) {
      int tag = nextTag(pos);
      if (tag < 0) {
        emitText(src.substring(pos));
        pos = src.length();
        break;
      }
      char kind = src.charAt(tag + 1);
      char sign = tag + 2 < src.length() ? src.charAt(tag + 2) : 0;
      String text = src.substring(pos, tag);
      if (sign == '-') {
        text = PyStrings.rstrip(text, null);
      } else if (sign != '+' && kind != '{') {
        int lpos = text.lastIndexOf('\n') + 1;
        if ((lpos > 0 || lineStarting) && lpos < text.length() && allSpace(text, lpos)) {
          text = text.substring(0, lpos);
        }
      }
      emitText(text);
      line += count(src, pos, tag);
      pos = tag + 2 + (sign == '-' || sign == '+' ? 1 : 0);
      if (kind == '#') {
        comment();
      } else if (kind == '%' && rawAhead()) {
        raw();
      } else {
        tag(kind == '{');
      }
    }
    out.add(new Token(Kind.EOF, "", line));
  }

  private int nextTag(int from) {
    int i = from;
    while (true) {
      i = src.indexOf('{', i);
      if (i < 0 || i + 1 >= src.length()) {
        return -1;
      }
      char c = src.charAt(i + 1);
      if (c == '{' || c == '%' || c == '#') {
        return i;
      }
      i++;
    }
  }

  private void emitText(String text) {
    if (!text.isEmpty()) {
      out.add(new Token(Kind.TEXT, text, line));
    }
  }

  private static boolean allSpace(String s, int from) {
    for (int i = from; i < s.length(); i++) {
      if (!PyStrings.isSpace(s.charAt(i))) {
        return false;
      }
    }
    return true;
  }

  private static int count(String s, int from, int to) {
    int n = 0;
    for (int i = from; i < to; i++) {
      if (s.charAt(i) == '\n') {
        n++;
      }
    }
    return n;
  }

  /** After an end delimiter at {@code end}: applies {@code -}, {@code +} and trim_blocks. */
  private void afterBlockEnd(int afterDelim, boolean dash, boolean plus) {
    int p = afterDelim;
    if (dash) {
      while (p < src.length() && PyStrings.isSpace(src.charAt(p))) {
        p++;
      }
    } else if (!plus && p < src.length() && src.charAt(p) == '\n') {
      p++;
    }
    lineStarting = p > afterDelim && src.charAt(p - 1) == '\n';
    line += count(src, pos, p);
    pos = p;
  }

  private void comment() {
    int end = src.indexOf("#}", pos);
    if (end < 0) {
      throw error("unterminated comment");
    }
    boolean dash = end > pos && src.charAt(end - 1) == '-';
    boolean plus = end > pos && src.charAt(end - 1) == '+';
    line += count(src, pos, end);
    pos = end;
    afterBlockEnd(end + 2, dash, plus);
  }

  private boolean rawAhead() {
    int p = skipWs(pos);
    return src.startsWith("raw", p)
        && (p + 3 >= src.length() || !Character.isJavaIdentifierPart(src.charAt(p + 3)));
  }

  private void raw() {
    int p = skipWs(pos) + 3;
    p = skipWs(p);
    boolean dash = src.startsWith("-%}", p);
    if (!dash && !src.startsWith("%}", p) && !src.startsWith("+%}", p)) {
      throw error("expected %} after raw");
    }
    line += count(src, pos, p);
    pos = p;
    afterBlockEnd(p + (dash || src.charAt(p) == '+' ? 3 : 2), dash, src.charAt(p) == '+');
    int search = pos;
    while (true) {
      int tag = src.indexOf("{%", search);
      if (tag < 0) {
        throw error("missing endraw");
      }
      int q = tag + 2;
      boolean startDash = q < src.length() && src.charAt(q) == '-';
      if (startDash || (q < src.length() && src.charAt(q) == '+')) {
        q++;
      }
      q = skipWs(q);
      if (src.startsWith("endraw", q)) {
        String text = src.substring(pos, tag);
        if (startDash) {
          text = PyStrings.rstrip(text, null);
        }
        emitText(text);
        q = skipWs(q + 6);
        boolean d = src.startsWith("-%}", q);
        boolean pl = src.startsWith("+%}", q);
        if (!d && !pl && !src.startsWith("%}", q)) {
          throw error("expected %} after endraw");
        }
        line += count(src, pos, q);
        pos = q;
        afterBlockEnd(q + (d || pl ? 3 : 2), d, pl);
        return;
      }
      search = tag + 2;
    }
  }

  private int skipWs(int p) {
    while (p < src.length() && Character.isWhitespace(src.charAt(p))) {
      p++;
    }
    return p;
  }

  private void tag(boolean variable) {
    out.add(new Token(variable ? Kind.VAR_BEGIN : Kind.BLOCK_BEGIN, "", line));
    Deque<Character> balance = new ArrayDeque<>();
    while (true) {
      if (pos >= src.length()) {
        throw error("unterminated " + (variable ? "{{" : "{%"));
      }
      char c = src.charAt(pos);
      if (Character.isWhitespace(c)) {
        if (c == '\n') {
          line++;
        }
        pos++;
        continue;
      }
      if (balance.isEmpty()) {
        String close = variable ? "}}" : "%}";
        boolean dash = src.startsWith("-" + close, pos);
        boolean plus = !variable && src.startsWith("+" + close, pos);
        if (dash || plus || src.startsWith(close, pos)) {
          out.add(new Token(variable ? Kind.VAR_END : Kind.BLOCK_END, "", line));
          int after = pos + close.length() + (dash || plus ? 1 : 0);
          if (variable) {
            int p = after;
            if (dash) {
              while (p < src.length() && PyStrings.isSpace(src.charAt(p))) {
                p++;
              }
            }
            line += count(src, after, p);
            pos = p;
            lineStarting = false;
          } else {
            afterBlockEnd(after, dash, plus);
          }
          return;
        }
      }
      if (Character.isLetter(c) || c == '_') {
        int s = pos;
        while (pos < src.length()
            && (Character.isLetterOrDigit(src.charAt(pos)) || src.charAt(pos) == '_')) {
          pos++;
        }
        out.add(new Token(Kind.NAME, src.substring(s, pos), line));
      } else if (c >= '0' && c <= '9') {
        number();
      } else if (c == '\'' || c == '"') {
        string(c);
      } else {
        String op = null;
        for (String o : OPS) {
          if (src.startsWith(o, pos)) {
            op = o;
            break;
          }
        }
        if (op == null) {
          throw error("unexpected character '" + c + "'");
        }
        if (op.equals("(") || op.equals("[") || op.equals("{")) {
          balance.push(op.charAt(0));
        } else if (op.equals(")") || op.equals("]") || op.equals("}")) {
          if (balance.isEmpty()) {
            throw error("unexpected '" + op + "'");
          }
          balance.pop();
        }
        out.add(new Token(Kind.OP, op, line));
        pos += op.length();
      }
    }
  }

  private void number() {
    int s = pos;
    while (pos < src.length() && (Character.isDigit(src.charAt(pos)) || src.charAt(pos) == '_')) {
      pos++;
    }
    boolean flt = false;
    if (pos + 1 < src.length()
        && src.charAt(pos) == '.'
        && Character.isDigit(src.charAt(pos + 1))) {
      flt = true;
      pos++;
      while (pos < src.length() && (Character.isDigit(src.charAt(pos)) || src.charAt(pos) == '_')) {
        pos++;
      }
    }
    if (pos < src.length() && (src.charAt(pos) == 'e' || src.charAt(pos) == 'E')) {
      int p = pos + 1;
      if (p < src.length() && (src.charAt(p) == '+' || src.charAt(p) == '-')) {
        p++;
      }
      if (p < src.length() && Character.isDigit(src.charAt(p))) {
        flt = true;
        pos = p;
        while (pos < src.length() && Character.isDigit(src.charAt(pos))) {
          pos++;
        }
      }
    }
    String text = src.substring(s, pos).replace("_", "");
    out.add(new Token(flt ? Kind.FLOAT : Kind.INT, text, line));
  }

  private void string(char quote) {
    StringBuilder sb = new StringBuilder();
    int p = pos + 1;
    while (true) {
      if (p >= src.length()) {
        throw error("unterminated string");
      }
      char c = src.charAt(p);
      if (c == quote) {
        p++;
        break;
      }
      if (c == '\\' && p + 1 < src.length()) {
        char e = src.charAt(p + 1);
        p += 2;
        switch (e) {
          case 'n' -> sb.append('\n');
          case 't' -> sb.append('\t');
          case 'r' -> sb.append('\r');
          case 'b' -> sb.append('\b');
          case 'f' -> sb.append('\f');
          case 'v' -> sb.append('\u000b');
          case 'a' -> sb.append('\u0007');
          case '0', '1', '2', '3', '4', '5', '6', '7' -> {
            int v = e - '0';
            int k = 0;
            while (k < 2 && p < src.length() && src.charAt(p) >= '0' && src.charAt(p) <= '7') {
              v = v * 8 + (src.charAt(p++) - '0');
              k++;
            }
            sb.appendCodePoint(v);
          }
          case 'x' -> {
            sb.appendCodePoint(Integer.parseInt(src.substring(p, p + 2), 16));
            p += 2;
          }
          case 'u' -> {
            sb.appendCodePoint(Integer.parseInt(src.substring(p, p + 4), 16));
            p += 4;
          }
          case 'U' -> {
            sb.appendCodePoint(Integer.parseInt(src.substring(p, p + 8), 16));
            p += 8;
          }
          case '\\', '\'', '"' -> sb.append(e);
          case '\n' -> {
            line++;
          }
          default -> sb.append('\\').append(e);
        }
        continue;
      }
      if (c == '\n') {
        line++;
      }
      if (c == '\r') {
        // jinja2 normalises newlines in string literals
        sb.append('\n');
        if (p + 1 < src.length() && src.charAt(p + 1) == '\n') {
          p++;
        }
        p++;
        continue;
      }
      sb.append(c);
      p++;
    }
    out.add(new Token(Kind.STRING, sb.toString(), line));
    pos = p;
  }

  private ChatTemplateException error(String message) {
    return new ChatTemplateException("chat template syntax error at line " + line + ": " + message);
  }
}
