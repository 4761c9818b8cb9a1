package io.kvroute.service.internal;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParseException;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.exc.InputCoercionException;
import io.kvroute.kvindex.PrefixMatch;
import java.io.IOException;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;

/**
 * Streaming (tree-free) parsing of {@code POST /api/v1/score} bodies and writing of its answers.
 * Each field error is an {@link ApiException} naming the field ({@code token_ids[3]}).
 *
 * <p>A {@link Parsed} is reused by one thread across requests; not thread-safe.
 */
final class ScoreCodec {
  static final JsonFactory JSON = new JsonFactory();
  private static final BigInteger U64_MAX = BigInteger.ONE.shiftLeft(64).subtract(BigInteger.ONE);
  static final String KNOWN_FIELDS =
      "prompt, token_ids, prompt_blocks, model, lora, candidate_pods";

  private ScoreCodec() {}

  /** A parsed request; buffers are reused. */
  static final class Parsed {
    String prompt;
    int[] tokens = new int[4096];
    int numTokens = -1;
    long[] blocks = new long[256];
    int numBlocks = -1;
    String model;
    String lora;
    final ArrayList<String> candidates = new ArrayList<>();
    boolean hasCandidates;
    final HashSet<String> seen = new HashSet<>();
    final ScoreFastParser fast = new ScoreFastParser();
    String lastModel; // the previous request's model, reused when the bytes match

    void reset() {
      prompt = null;
      numTokens = -1;
      numBlocks = -1;
      model = null;
      lora = null;
      candidates.clear();
      hasCandidates = false;
    }

    /** The name whose chain roots the request keys (LoRA, else the model, else null = base). */
    String keyRoot() {
      return lora != null ? lora : model;
    }

    /** A copy safe to hand to another thread (for the asynchronous tokenizer path). */
    Parsed detach() {
      Parsed p = new Parsed();
      p.prompt = prompt;
      p.model = model;
      p.lora = lora;
      p.candidates.addAll(candidates);
      p.hasCandidates = hasCandidates;
      p.tokens = new int[0];
      p.blocks = new long[0];
      return p;
    }
  }

  /**
   * Parses a score request: a fast scanner for the common well-formed shapes, falling back to a
   * Jackson streaming parse (which produces the precise field errors) on anything else.
   */
  static void parse(
      byte[] body, int len, Parsed out, int maxTokens, int maxBlocks, int maxCandidates) {
    parse(body, 0, len, out, maxTokens, maxBlocks, maxCandidates);
  }

  /**
   * Parses {@code body[off, off + len)}; see {@link #parse(byte[], int, Parsed, int, int, int)}.
   */
  static void parse(
      byte[] body, int off, int len, Parsed out, int maxTokens, int maxBlocks, int maxCandidates) {
    out.reset();
    if (out.fast.parse(body, off, len, out, maxTokens, maxBlocks, maxCandidates)) {
      if (out.prompt == null && out.numTokens < 0 && out.numBlocks < 0) {
        throw ApiException.badRequest(
            "prompt", "one of prompt, token_ids or prompt_blocks is required");
      }
      return;
    }
    out.reset();
    parseSlow(body, off, len, out, maxTokens, maxBlocks, maxCandidates);
  }

  static void parseSlow(
      byte[] body, int len, Parsed out, int maxTokens, int maxBlocks, int maxCandidates) {
    parseSlow(body, 0, len, out, maxTokens, maxBlocks, maxCandidates);
  }

  private static void parseSlow(
      byte[] body, int off, int len, Parsed out, int maxTokens, int maxBlocks, int maxCandidates) {
    try (JsonParser p = JSON.createParser(body, off, len)) {
      JsonToken t = p.nextToken();
      if (t != JsonToken.START_OBJECT) {
        throw ApiException.badRequest("body", "the body must be a JSON object");
      }
      while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        t = p.nextToken();
        switch (name) {
          case "prompt":
            out.prompt = optionalString(p, t, "prompt");
            break;
          case "model":
            out.model = optionalString(p, t, "model");
            if (out.model != null && out.model.isEmpty()) {
              out.model = null;
            }
            break;
          case "lora":
            out.lora = optionalString(p, t, "lora");
            if (out.lora != null && out.lora.isEmpty()) {
              out.lora = null;
            }
            break;
          case "token_ids":
            if (isArray(t, "token_ids", "integers")) {
              parseTokens(p, t, out, maxTokens);
            }
            break;
          case "prompt_blocks":
            if (isArray(t, "prompt_blocks", "block keys")) {
              parseBlocks(p, t, out, maxBlocks);
            }
            break;
          case "candidate_pods":
            if (isArray(t, "candidate_pods", "pod ids")) {
              parseCandidates(p, t, out, maxCandidates);
            }
            break;
          default:
            throw ApiException.badRequest(
                name, "unknown field \"" + name + "\" (known: " + KNOWN_FIELDS + ")");
        }
      }
      if (p.nextToken() != null) {
        throw ApiException.badRequest("body", "unexpected content after the JSON object");
      }
    } catch (InputCoercionException e) {
      throw ApiException.badRequest("body", "number out of range: " + e.getOriginalMessage());
    } catch (JsonParseException e) {
      throw ApiException.badRequest(
          "body",
          "invalid JSON at line "
              + e.getLocation().getLineNr()
              + ", column "
              + e.getLocation().getColumnNr()
              + ": "
              + e.getOriginalMessage());
    } catch (IOException e) {
      throw ApiException.badRequest("body", "unreadable body: " + e.getMessage());
    }
    if (out.prompt == null && out.numTokens < 0 && out.numBlocks < 0) {
      throw ApiException.badRequest(
          "prompt", "one of prompt, token_ids or prompt_blocks is required");
    }
  }

  private static String optionalString(JsonParser p, JsonToken t, String field) throws IOException {
    if (t == JsonToken.VALUE_NULL) {
      return null;
    }
    if (t != JsonToken.VALUE_STRING) {
      p.skipChildren();
      throw mustBe(field, "a string, was " + describe(t));
    }
    return p.getText();
  }

  private static void parseTokens(JsonParser p, JsonToken t, Parsed out, int maxTokens)
      throws IOException {
    int n = 0;
    int[] buf = out.tokens;
    while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
      if (t != JsonToken.VALUE_NUMBER_INT) {
        throw mustBe("token_ids[" + n + "]", "an integer, was " + describe(t));
      }
      if (p.getNumberType() != JsonParser.NumberType.INT || p.getIntValue() < 0) {
        throw mustBe("token_ids[" + n + "]", "in [0, 2147483647], was " + p.getText());
      }
      if (n == maxTokens) {
        throw tooMany("token_ids", "limits.max_tokens = " + maxTokens + " tokens");
      }
      if (n == buf.length) {
        buf = Arrays.copyOf(buf, Math.min(maxTokens, n * 2));
        out.tokens = buf;
      }
      buf[n++] = p.getIntValue();
    }
    out.numTokens = n;
  }

  private static void parseBlocks(JsonParser p, JsonToken t, Parsed out, int maxBlocks)
      throws IOException {
    int n = 0;
    long[] buf = out.blocks;
    while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
      String field = "prompt_blocks[" + n + "]";
      long key;
      if (t == JsonToken.VALUE_STRING) {
        key = parseHexKey(p.getText(), field);
      } else if (t == JsonToken.VALUE_NUMBER_INT) {
        BigInteger v = p.getBigIntegerValue();
        if (v.signum() < 0 || v.compareTo(U64_MAX) > 0) {
          throw mustBe(field, "an unsigned 64-bit integer, was " + v);
        }
        key = v.longValue();
      } else {
        throw mustBe(
            field, "a block key (16 hex digits or an unsigned integer), was " + describe(t));
      }
      if (n == maxBlocks) {
        throw tooMany("prompt_blocks", maxBlocks + " blocks (limits.max_tokens / block size)");
      }
      if (n == buf.length) {
        buf = Arrays.copyOf(buf, Math.min(maxBlocks, n * 2));
        out.blocks = buf;
      }
      buf[n++] = key;
    }
    out.numBlocks = n;
  }

  /**
   * False for null, true for the start of an array, else a 400: not an array of {@code elements}.
   */
  private static boolean isArray(JsonToken t, String field, String elements) {
    if (t == JsonToken.VALUE_NULL) {
      return false;
    }
    if (t != JsonToken.START_ARRAY) {
      throw mustBe(field, "an array of " + elements + ", was " + describe(t));
    }
    return true;
  }

  /** A 400 for {@code field}: "{@code field} must be {@code what}". */
  private static ApiException mustBe(String field, String what) {
    return ApiException.badRequest(field, field + " must be " + what);
  }

  /** A 400 for a list {@code field} longer than allowed: "{@code field} has more than …". */
  private static ApiException tooMany(String field, String limit) {
    return ApiException.badRequest(field, field + " has more than " + limit);
  }

  static long parseHexKey(String s, String field) {
    int from = s.startsWith("0x") || s.startsWith("0X") ? 2 : 0;
    int len = s.length() - from;
    if (s.indexOf(':') >= 0) {
      throw ApiException.badRequest(
          field,
          field
              + " looks like an engine hash (\""
              + abbreviate(s)
              + "\"); send the index's request keys (16 hex digits, see"
              + " RequestKeyHasher) or token_ids instead");
    }
    if (len < 1 || len > 16) {
      throw mustBe(field, "1-16 hex digits, was \"" + abbreviate(s) + "\"");
    }
    long v = 0;
    for (int i = from; i < s.length(); i++) {
      int d = Character.digit(s.charAt(i), 16);
      if (d < 0) {
        throw mustBe(field, "1-16 hex digits, was \"" + abbreviate(s) + "\"");
      }
      v = (v << 4) | d;
    }
    return v;
  }

  private static void parseCandidates(JsonParser p, JsonToken t, Parsed out, int maxCandidates)
      throws IOException {
    out.hasCandidates = true;
    HashSet<String> seen = out.seen;
    seen.clear();
    int n = 0;
    while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
      String field = "candidate_pods[" + n + "]";
      if (t != JsonToken.VALUE_STRING) {
        throw mustBe(field, "a string, was " + describe(t));
      }
      String id = p.getText();
      if (id.isEmpty() || id.length() > 253) {
        throw mustBe(field, "1-253 characters");
      }
      if (n == maxCandidates) {
        throw tooMany("candidate_pods", "limits.max_candidate_pods = " + maxCandidates);
      }
      if (!seen.add(id)) {
        throw ApiException.badRequest(field, field + " \"" + id + "\" is listed twice");
      }
      out.candidates.add(id);
      n++;
    }
    seen.clear();
  }

  private static String describe(JsonToken t) {
    switch (t) {
      case START_OBJECT:
        return "an object";
      case START_ARRAY:
        return "an array";
      case VALUE_STRING:
        return "a string";
      case VALUE_NUMBER_INT:
      case VALUE_NUMBER_FLOAT:
        return "a number";
      case VALUE_TRUE:
      case VALUE_FALSE:
        return "a boolean";
      case VALUE_NULL:
        return "null";
      default:
        return t.toString();
    }
  }

  private static String abbreviate(String s) {
    return s.length() <= 40 ? s : s.substring(0, 37) + "...";
  }

  /** A growable byte buffer (unsynchronised, unlike {@code ByteArrayOutputStream}). */
  static final class Bytes {
    byte[] buf;
    int size;

    Bytes() {
      this(16 << 10);
    }

    Bytes(int capacity) {
      buf = new byte[capacity];
    }

    void reset() {
      size = 0;
    }

    void ensure(int extra) {
      if (size + extra > buf.length) {
        buf = Arrays.copyOf(buf, Math.max(buf.length * 2, size + extra));
      }
    }

    Bytes ascii(String s) {
      int n = s.length();
      ensure(n);
      for (int j = 0; j < n; j++) {
        buf[size++] = (byte) s.charAt(j);
      }
      return this;
    }

    Bytes jsonString(String s) {
      int n = s.length();
      ensure(n * 6 + 2);
      buf[size++] = '"';
      for (int j = 0; j < n; j++) {
        char c = s.charAt(j);
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
          buf[size++] = (byte) c;
        } else if (c < 0x80) {
          buf[size++] = '\\';
          buf[size++] = 'u';
          buf[size++] = '0';
          buf[size++] = '0';
          buf[size++] = (byte) Character.forDigit(c >> 4, 16);
          buf[size++] = (byte) Character.forDigit(c & 15, 16);
        } else {
          // Non-ASCII: escape as UTF-16 code units (valid JSON, ASCII output).
          buf[size++] = '\\';
          buf[size++] = 'u';
          for (int shift = 12; shift >= 0; shift -= 4) {
            buf[size++] = (byte) Character.forDigit((c >> shift) & 15, 16);
          }
        }
      }
      buf[size++] = '"';
      return this;
    }

    Bytes number(long v) {
      ensure(20);
      if (v < 0) {
        buf[size++] = '-';
        v = -v;
      }
      if (v < 10) {
        buf[size++] = (byte) ('0' + v);
        return this;
      }
      int digits = v < 100 ? 2 : v < 1000 ? 3 : v < 10_000 ? 4 : v < 100_000 ? 5 : 6;
      if (digits == 6) {
        for (long t = v / 1_000_000; t > 0; t /= 10) {
          digits++;
        }
      }
      int pos = size + digits;
      size = pos;
      if (v <= Integer.MAX_VALUE) {
        int x = (int) v;
        do {
          int q = x / 10;
          buf[--pos] = (byte) ('0' + x - q * 10);
          x = q;
        } while (x > 0);
      } else {
        do {
          buf[--pos] = (byte) ('0' + v % 10);
          v /= 10;
        } while (v > 0);
      }
      return this;
    }

    /** Appends a copy of {@code [from, from + len)} of what was written already. */
    Bytes copyWithin(int from, int len) {
      ensure(len);
      System.arraycopy(buf, from, buf, size, len);
      size += len;
      return this;
    }

    /** Writes {@code units / 10^decimals} as a JSON number with at least one fraction digit. */
    Bytes fixed(long units, int decimals) {
      long scale = decimals == 2 ? 100 : 10_000;
      number(units / scale);
      long frac = units % scale;
      int digits = decimals;
      while (digits > 1 && frac % 10 == 0) {
        frac /= 10;
        digits--;
      }
      ensure(digits + 1);
      buf[size++] = '.';
      int pos = size + digits;
      size = pos;
      for (int d = 0; d < digits; d++) {
        buf[--pos] = (byte) ('0' + frac % 10);
        frac /= 10;
      }
      return this;
    }
  }

  /**
   * Writes the score answer.
   *
   * @param match the lookup result (pods in request order)
   * @param total full blocks in the prompt
   * @param gpuWeight the weight of a GPU block (scores are relative to it)
   * @return the recommended pod's index in {@code match}, -1 when no pod holds a block
   */
  static int writeScores(Bytes o, PrefixMatch match, int total, double gpuWeight, int blockSize) {
    int pods = match.size();
    o.ensure(pods * 112 + 128);
    o.ascii("{\"scores\":{");
    // Most pods usually hold none of the prompt: their entry after the id is the same bytes,
    // written once and then copied from where it was first written.
    int missAt = -1;
    int missLen = 0;
    List<String> tiers = match.tierNames();
    int best = -1;
    long bestScore = 0;
    for (int i = 0; i < pods; i++) {
      if (i > 0) {
        o.ascii(",");
      }
      o.jsonString(match.podId(i));
      int present = match.matchedBlocks(i);
      if (present == 0 && match.score(i) == 0) {
        if (missAt < 0) {
          missAt = o.size;
          o.ascii(":{\"cache_hit_rate\":0.0,\"blocks_present\":0,\"blocks_total\":")
              .number(total)
              .ascii(",\"score\":0.0,\"blocks_by_tier\":{}}");
          missLen = o.size - missAt;
        } else {
          o.copyWithin(missAt, missLen);
        }
        continue;
      }
      long score =
          total == 0
              ? 0
              : Math.min(10_000, Math.round(10_000.0 * match.score(i) / (gpuWeight * total)));
      long rate = total == 0 ? 0 : Math.round(10_000.0 * present / total);
      if (score > bestScore) {
        bestScore = score;
        best = i;
      }
      o.ascii(":{\"cache_hit_rate\":").fixed(rate, 4);
      o.ascii(",\"blocks_present\":").number(present);
      o.ascii(",\"blocks_total\":").number(total);
      o.ascii(",\"score\":").fixed(score, 2);
      o.ascii(",\"blocks_by_tier\":{");
      if (present > 0) {
        boolean first = true;
        for (int t = 0; t < tiers.size(); t++) {
          int c = match.blocksOnTier(i, t);
          if (c > 0) {
            if (!first) {
              o.ascii(",");
            }
            first = false;
            o.jsonString(tiers.get(t)).ascii(":").number(c);
          }
        }
      }
      o.ascii("}}");
    }
    o.ascii("},\"recommendation\":");
    if (best < 0) {
      o.ascii("null");
    } else {
      o.jsonString(match.podId(best));
    }
    o.ascii(",\"blocks_total\":").number(total);
    o.ascii(",\"block_size\":").number(blockSize).ascii("}");
    return best;
  }

  static double round2(double v) {
    return Math.round(v * 100.0) / 100.0;
  }

  static double round4(double v) {
    return Math.round(v * 10_000.0) / 10_000.0;
  }
}
