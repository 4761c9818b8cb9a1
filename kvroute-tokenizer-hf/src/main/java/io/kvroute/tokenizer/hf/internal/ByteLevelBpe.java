package io.kvroute.tokenizer.hf.internal;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import java.text.Normalizer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.PriorityQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A pure-Java encoder for the byte-level BPE {@code tokenizer.json} layout of GPT-2, Llama 3 and
 * Qwen 2/3 style models, equal to the Hugging Face {@code tokenizers} library for the
 * configurations {@link #supports} accepts (and only those):
 *
 * <ul>
 *   <li>added tokens without {@code single_word}/{@code lstrip}/{@code rstrip}, matched
 *       leftmost-longest on the raw text (as the library's Aho-Corasick split does);
 *   <li>normalizer: none or {@code NFC};
 *   <li>pre-tokenizer: {@code ByteLevel} (GPT-2 regex, no prefix space) or a {@code Sequence} of
 *       {@code Split} (regex, {@code Isolated}) and {@code ByteLevel} without regex;
 *   <li>model: {@code BPE} without dropout, byte fallback, unknown token or affixes ({@code
 *       ignore_merges} honoured);
 *   <li>post-processor: none, {@code ByteLevel}, {@code TemplateProcessing} or a {@code Sequence}
 *       of these.
 * </ul>
 *
 * <p>It exists because the native library through DJL costs ≈ 1.7 µs per token on the project's
 * machines (8k tokens ≈ 15 ms). Equality with the native library is checked by a property test on
 * random text and by the reference vectors; anything else goes to DJL.
 *
 * <p>Thread-safe: immutable tables and a bounded concurrent word cache.
 */
public final class ByteLevelBpe implements TextEncoder {
  private static final int WORD_CACHE_MAX = 200_000;
  private static final int CACHE_WORD_MAX_CHARS = 64;

  /** GPT-2's byte → printable character table. */
  private static final char[] BYTE_CHARS = byteChars();

  private final Map<String, Integer> vocab;
  private final Map<Long, long[]> merges; // (left id, right id) -> {rank, merged id}
  private final boolean ignoreMerges;
  private final boolean nfc;
  private final List<Pattern> splits;
  private final FastSplit fast;
  private final AddedTokens added;
  private final int[] prefixIds;
  private final int[] suffixIds;
  private final ConcurrentHashMap<String, int[]> cache = new ConcurrentHashMap<>();
  private final Map<Integer, String> tokens = new ConcurrentHashMap<>();

  private ByteLevelBpe(
      Map<String, Integer> vocab,
      Map<Long, long[]> merges,
      boolean ignoreMerges,
      boolean nfc,
      List<Pattern> splits,
      boolean fastSplit,
      AddedTokens added,
      int[] prefixIds,
      int[] suffixIds) {
    this.vocab = vocab;
    this.merges = merges;
    this.ignoreMerges = ignoreMerges;
    this.nfc = nfc;
    this.splits = splits;
    this.fast =
        fastSplit && splits.size() == 1 ? FastSplit.forPattern(splits.get(0).pattern()) : null;
    this.added = added;
    this.prefixIds = prefixIds;
    this.suffixIds = suffixIds;
  }

  /** GPT-2's pre-tokenization regex (ByteLevel with {@code use_regex=true}). */
  static final String GPT2_PATTERN =
      "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

  /**
   * An encoder for {@code tokenizer.json}, or empty when the file uses anything this class does not
   * reproduce exactly (then use the native library).
   */
  public static Optional<ByteLevelBpe> of(JsonNode json) {
    return of(json, true);
  }

  /**
   * Like {@link #of(JsonNode)}; {@code fastSplit} false always uses {@link java.util.regex} (tests
   * compare both paths).
   */
  public static Optional<ByteLevelBpe> of(JsonNode json, boolean fastSplit) {
    try {
      return Optional.ofNullable(build(json, fastSplit));
    } catch (RuntimeException e) {
      return Optional.empty();
    }
  }

  /** True when {@link #of} accepts the file. */
  public static boolean supports(JsonNode json) {
    return of(json).isPresent();
  }

  private static ByteLevelBpe build(JsonNode json, boolean fastSplit) {
    JsonNode model = json.path("model");
    if (!"BPE".equals(model.path("type").asText())
        || !isNull(model.get("dropout"))
        || !isNull(model.get("unk_token"))
        || model.path("byte_fallback").asBoolean(false)
        || !isEmpty(model.get("continuing_subword_prefix"))
        || !isEmpty(model.get("end_of_word_suffix"))) {
      return null;
    }
    boolean nfc;
    JsonNode norm = json.get("normalizer");
    if (isNull(norm)) {
      nfc = false;
    } else if ("NFC".equals(norm.path("type").asText())) {
      nfc = true;
    } else {
      return null;
    }
    List<Pattern> splits = preTokenizer(json.get("pre_tokenizer"));
    if (splits == null) {
      return null;
    }
    Map<String, Integer> vocab = new HashMap<>(model.path("vocab").size() * 2);
    model.path("vocab").properties().forEach(e -> vocab.put(e.getKey(), e.getValue().intValue()));
    for (int b = 0; b < 256; b++) {
      if (!vocab.containsKey(String.valueOf(BYTE_CHARS[b]))) {
        return null; // every byte must be a token, or BPE could meet an unknown symbol
      }
    }
    Map<Long, long[]> merges = new HashMap<>(model.path("merges").size() * 2);
    int rank = 0;
    for (JsonNode m : model.path("merges")) {
      String a;
      String b;
      if (m.isArray()) {
        a = m.get(0).asText();
        b = m.get(1).asText();
      } else {
        String s = m.asText();
        int sp = s.indexOf(' ', 1);
        a = s.substring(0, sp);
        b = s.substring(sp + 1);
      }
      Integer ia = vocab.get(a);
      Integer ib = vocab.get(b);
      Integer merged = vocab.get(a + b);
      if (ia == null || ib == null || merged == null) {
        return null;
      }
      merges.putIfAbsent(pair(ia, ib), new long[] {rank, merged});
      rank++;
    }
    AddedTokens added = AddedTokens.of(json.path("added_tokens"), nfc);
    if (added == null) {
      return null;
    }
    List<Integer> pre = new ArrayList<>();
    List<Integer> post = new ArrayList<>();
    if (!postProcessor(json.get("post_processor"), pre, post)) {
      return null;
    }
    return new ByteLevelBpe(
        vocab,
        merges,
        model.path("ignore_merges").asBoolean(false),
        nfc,
        splits,
        fastSplit,
        added,
        pre.stream().mapToInt(Integer::intValue).toArray(),
        post.stream().mapToInt(Integer::intValue).toArray());
  }

  private static boolean isNull(JsonNode n) {
    return n == null || n.isNull();
  }

  private static boolean isEmpty(JsonNode n) {
    return n == null || n.isNull() || n.asText().isEmpty();
  }

  private static List<Pattern> preTokenizer(JsonNode pt) {
    if (isNull(pt)) {
      return null;
    }
    String type = pt.path("type").asText();
    if (type.equals("ByteLevel")) {
      if (pt.path("add_prefix_space").asBoolean(false)) {
        return null;
      }
      return pt.path("use_regex").asBoolean(true) ? List.of(compile(GPT2_PATTERN)) : List.of();
    }
    if (!type.equals("Sequence")) {
      return null;
    }
    List<Pattern> out = new ArrayList<>();
    JsonNode seq = pt.path("pretokenizers");
    for (int i = 0; i < seq.size(); i++) {
      JsonNode p = seq.get(i);
      String t = p.path("type").asText();
      if (t.equals("Split")) {
        if (!"Isolated".equals(p.path("behavior").asText())
            || p.path("invert").asBoolean(false)
            || !p.path("pattern").has("Regex")) {
          return null;
        }
        out.add(compile(p.path("pattern").path("Regex").asText()));
      } else if (t.equals("ByteLevel") && i == seq.size() - 1) {
        if (p.path("add_prefix_space").asBoolean(false) || p.path("use_regex").asBoolean(true)) {
          return null;
        }
      } else {
        return null;
      }
    }
    if (seq.isEmpty() || !"ByteLevel".equals(seq.get(seq.size() - 1).path("type").asText())) {
      return null;
    }
    return out;
  }

  /** Oniguruma's {@code \s} and {@code (?i)} are Unicode-aware: ask Java for the same. */
  private static Pattern compile(String regex) {
    return Pattern.compile(regex, Pattern.UNICODE_CHARACTER_CLASS | Pattern.UNICODE_CASE);
  }

  private static boolean postProcessor(JsonNode pp, List<Integer> pre, List<Integer> post) {
    if (isNull(pp)) {
      return true;
    }
    switch (pp.path("type").asText()) {
      case "ByteLevel":
        return true;
      case "Sequence":
        for (JsonNode p : pp.path("processors")) {
          if (!postProcessor(p, pre, post)) {
            return false;
          }
        }
        return true;
      case "TemplateProcessing":
        {
          JsonNode single = pp.path("single");
          boolean seen = false;
          for (JsonNode piece : single) {
            if (piece.has("Sequence")) {
              if (seen || !"A".equals(piece.path("Sequence").path("id").asText())) {
                return false;
              }
              seen = true;
            } else if (piece.has("SpecialToken")) {
              JsonNode st =
                  pp.path("special_tokens").path(piece.path("SpecialToken").path("id").asText());
              if (!st.path("ids").isArray()) {
                return false;
              }
              for (JsonNode id : st.path("ids")) {
                (seen ? post : pre).add(id.intValue());
              }
            } else {
              return false;
            }
          }
          return seen;
        }
      default:
        return false;
    }
  }

  // ------------------------------------------------------------------ encoding

  @Override
  public String engine() {
    return "java";
  }

  @Override
  public void close() {
    cache.clear();
  }

  @Override
  public String decode(int[] ids, boolean skipSpecialTokens) {
    if (tokens.isEmpty()) {
      vocab.forEach((k, v) -> tokens.put(v, k));
    }
    java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream();
    StringBuilder sb = new StringBuilder();
    for (int id : ids) {
      String added = this.added.content(id);
      if (added != null) {
        sb.append(new String(bytes.toByteArray(), StandardCharsets.UTF_8));
        bytes.reset();
        if (!(skipSpecialTokens && this.added.isSpecial(id))) {
          sb.append(added);
        }
        continue;
      }
      String t = tokens.get(id);
      if (t == null) {
        continue;
      }
      for (int k = 0; k < t.length(); k++) {
        bytes.write(byteOf(t.charAt(k)));
      }
    }
    sb.append(new String(bytes.toByteArray(), StandardCharsets.UTF_8));
    return sb.toString();
  }

  private static int byteOf(char c) {
    for (int b = 0; b < 256; b++) {
      if (BYTE_CHARS[b] == c) {
        return b;
      }
    }
    return '?';
  }

  @Override
  public int[] encode(String text, boolean addSpecialTokens) {
    IntList out = new IntList(Math.max(16, text.length() / 3));
    if (addSpecialTokens) {
      out.addAll(prefixIds);
    }
    int pos = 0;
    while (pos < text.length()) {
      AddedTokens.Match m = added.find(text, pos);
      int end = m == null ? text.length() : m.start();
      if (end > pos) {
        encodeSegment(text.substring(pos, end), out);
      }
      if (m == null) {
        break;
      }
      out.add(m.id());
      pos = m.end();
    }
    if (addSpecialTokens) {
      out.addAll(suffixIds);
    }
    return out.toArray();
  }

  private void encodeSegment(String segment, IntList out) {
    String s =
        nfc && !isNfc(segment) ? Normalizer.normalize(segment, Normalizer.Form.NFC) : segment;
    if (fast != null) {
      for (int i = 0; i < s.length(); ) {
        int end = fast.matchEnd(s, i);
        encodeWord(s.substring(i, end), out);
        i = end;
      }
      return;
    }
    if (splits.isEmpty()) {
      encodeWord(s, out);
      return;
    }
    splitAndEncode(s, 0, out);
  }

  /** Characters below U+0300 never change under NFC; otherwise ask the JDK. */
  private static boolean isNfc(String s) {
    for (int i = 0; i < s.length(); i++) {
      if (s.charAt(i) >= 0x300) {
        return Normalizer.isNormalized(s, Normalizer.Form.NFC);
      }
    }
    return true;
  }

  /** Applies split {@code level} (Isolated: matches and gaps are both pieces), then the next. */
  private void splitAndEncode(String s, int level, IntList out) {
    if (level == splits.size()) {
      encodeWord(s, out);
      return;
    }
    Matcher m = splits.get(level).matcher(s);
    int last = 0;
    while (m.find()) {
      if (m.end() == m.start()) {
        continue;
      }
      if (m.start() > last) {
        splitAndEncode(s.substring(last, m.start()), level + 1, out);
      }
      splitAndEncode(s.substring(m.start(), m.end()), level + 1, out);
      last = m.end();
    }
    if (last < s.length()) {
      splitAndEncode(s.substring(last), level + 1, out);
    }
  }

  private void encodeWord(String word, IntList out) {
    if (word.isEmpty()) {
      return;
    }
    boolean cacheable = word.length() <= CACHE_WORD_MAX_CHARS;
    if (cacheable) {
      int[] hit = cache.get(word);
      if (hit != null) {
        out.addAll(hit);
        return;
      }
    }
    byte[] bytes = word.getBytes(StandardCharsets.UTF_8);
    char[] chars = new char[bytes.length];
    for (int i = 0; i < bytes.length; i++) {
      chars[i] = BYTE_CHARS[bytes[i] & 0xff];
    }
    int[] ids;
    Integer whole = ignoreMerges ? vocab.get(new String(chars)) : null;
    if (whole != null) {
      ids = new int[] {whole};
    } else {
      ids = merge(chars);
    }
    if (cacheable) {
      if (cache.size() >= WORD_CACHE_MAX) {
        cache.clear();
      }
      cache.put(word, ids);
    }
    out.addAll(ids);
  }

  /** Lowest-rank-first BPE merges (leftmost on ties), as the library's merge loop. */
  private int[] merge(char[] chars) {
    int n = chars.length;
    int[] id = new int[n];
    int[] prev = new int[n];
    int[] next = new int[n];
    for (int i = 0; i < n; i++) {
      id[i] = vocab.get(String.valueOf(chars[i]));
      prev[i] = i - 1;
      next[i] = i + 1 < n ? i + 1 : -1;
    }
    if (n == 1) {
      return id;
    }
    if (n <= 12) {
      return mergeSmall(id, n);
    }
    boolean[] dead = new boolean[n];
    // heap entries: rank << 32 | position (ties resolve leftmost); merged id looked up again
    PriorityQueue<long[]> heap =
        new PriorityQueue<>(
            n, (x, y) -> x[0] != y[0] ? Long.compare(x[0], y[0]) : Long.compare(x[1], y[1]));
    for (int i = 0; i + 1 < n; i++) {
      long[] m = merges.get(pair(id[i], id[i + 1]));
      if (m != null) {
        heap.add(new long[] {m[0], i, id[i], id[i + 1]});
      }
    }
    int alive = n;
    while (!heap.isEmpty()) {
      long[] top = heap.poll();
      int i = (int) top[1];
      int j = dead[i] ? -1 : next[i];
      if (j < 0 || id[i] != (int) top[2] || id[j] != (int) top[3]) {
        continue; // stale entry
      }
      long[] m = merges.get(pair(id[i], id[j]));
      id[i] = (int) m[1];
      dead[j] = true;
      next[i] = next[j];
      if (next[j] >= 0) {
        prev[next[j]] = i;
      }
      alive--;
      if (prev[i] >= 0) {
        long[] l = merges.get(pair(id[prev[i]], id[i]));
        if (l != null) {
          heap.add(new long[] {l[0], prev[i], id[prev[i]], id[i]});
        }
      }
      if (next[i] >= 0) {
        long[] r = merges.get(pair(id[i], id[next[i]]));
        if (r != null) {
          heap.add(new long[] {r[0], i, id[i], id[next[i]]});
        }
      }
    }
    int[] out = new int[alive];
    int k = 0;
    for (int i = 0; i >= 0; i = next[i]) {
      out[k++] = id[i];
    }
    return out;
  }

  /** The quadratic loop for short words (no allocation beyond the id array). */
  private int[] mergeSmall(int[] id, int n) {
    int len = n;
    while (len > 1) {
      long best = Long.MAX_VALUE;
      int at = -1;
      long merged = 0;
      for (int i = 0; i + 1 < len; i++) {
        long[] m = merges.get(pair(id[i], id[i + 1]));
        if (m != null && m[0] < best) {
          best = m[0];
          at = i;
          merged = m[1];
        }
      }
      if (at < 0) {
        break;
      }
      id[at] = (int) merged;
      System.arraycopy(id, at + 2, id, at + 1, len - at - 2);
      len--;
    }
    return Arrays.copyOf(id, len);
  }

  private static long pair(int a, int b) {
    return ((long) a << 32) | (b & 0xffffffffL);
  }

  private static char[] byteChars() {
    char[] table = new char[256];
    boolean[] printable = new boolean[256];
    for (int b = '!'; b <= '~'; b++) {
      printable[b] = true;
    }
    for (int b = 0xA1; b <= 0xAC; b++) {
      printable[b] = true;
    }
    for (int b = 0xAE; b <= 0xFF; b++) {
      printable[b] = true;
    }
    int extra = 0;
    for (int b = 0; b < 256; b++) {
      table[b] = printable[b] ? (char) b : (char) (256 + extra++);
    }
    return table;
  }

  // ------------------------------------------------------------------ added tokens

  /** Added tokens matched leftmost-longest on the raw text. */
  static final class AddedTokens {
    record Match(int start, int end, int id) {}

    private final Map<Character, String[]> byFirst; // candidates, longest first
    private final Map<String, Integer> ids;
    private final Map<Integer, String> contents = new HashMap<>();
    private final java.util.Set<Integer> special = new java.util.HashSet<>();

    private AddedTokens(Map<Character, String[]> byFirst, Map<String, Integer> ids) {
      this.byFirst = byFirst;
      this.ids = ids;
      ids.forEach((k, v) -> contents.put(v, k));
    }

    String content(int id) {
      return contents.get(id);
    }

    boolean isSpecial(int id) {
      return special.contains(id);
    }

    static AddedTokens of(JsonNode list, boolean nfc) {
      Map<String, Integer> ids = new HashMap<>();
      Map<Character, List<String>> first = new HashMap<>();
      for (JsonNode t : list) {
        if (t.path("single_word").asBoolean(false)
            || t.path("lstrip").asBoolean(false)
            || t.path("rstrip").asBoolean(false)) {
          return null;
        }
        String content = t.path("content").asText();
        if (content.isEmpty()) {
          return null;
        }
        if (t.path("normalized").asBoolean(!t.path("special").asBoolean(false))
            && nfc
            && !Normalizer.isNormalized(content, Normalizer.Form.NFC)) {
          return null;
        }
        ids.put(content, t.path("id").intValue());
        first.computeIfAbsent(content.charAt(0), c -> new ArrayList<>()).add(content);
      }
      Map<Character, String[]> byFirst = new HashMap<>();
      first.forEach(
          (c, l) -> {
            l.sort((a, b) -> Integer.compare(b.length(), a.length()));
            byFirst.put(c, l.toArray(new String[0]));
          });
      AddedTokens out = new AddedTokens(byFirst, ids);
      for (JsonNode t : list) {
        if (t.path("special").asBoolean(false)) {
          out.special.add(t.path("id").intValue());
        }
      }
      return out;
    }

    Match find(String text, int from) {
      if (byFirst.isEmpty()) {
        return null;
      }
      for (int i = from; i < text.length(); i++) {
        String[] cands = byFirst.get(text.charAt(i));
        if (cands == null) {
          continue;
        }
        for (String c : cands) {
          if (text.startsWith(c, i)) {
            return new Match(i, i + c.length(), ids.get(c));
          }
        }
      }
      return null;
    }
  }

  /** A growable int array. */
  private static final class IntList {
    private int[] a;
    private int n;

    IntList(int capacity) {
      a = new int[capacity];
    }

    void add(int v) {
      if (n == a.length) {
        a = Arrays.copyOf(a, a.length * 2);
      }
      a[n++] = v;
    }

    void addAll(int[] vs) {
      if (n + vs.length > a.length) {
        a = Arrays.copyOf(a, Math.max(a.length * 2, n + vs.length));
      }
      System.arraycopy(vs, 0, a, n, vs.length);
      n += vs.length;
    }

    int[] toArray() {
      return Arrays.copyOf(a, n);
    }
  }
}
