package io.kvroute.replay;

import io.kvroute.replay.internal.MooncakeTraceReader;
import io.kvroute.replay.internal.TraceRecord;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.Objects;
import java.util.SplittableRandom;
import java.util.zip.GZIPInputStream;

/**
 * The requests a replay sends: a Mooncake trace ({@link #mooncakeTrace(Path)}) or a synthetic shape
 * ({@link #sharedPrefix(SharedPrefix, long)}), in arrival order. Prompts are materialised as token
 * ids only when a request is sent (token {@code j} of a block id is a fixed function of both: equal
 * ids, equal tokens).
 *
 * <p>Immutable and thread-safe.
 */
public final class Workload {
  /** Tokens per hash id in Mooncake's traces. */
  public static final int MOONCAKE_BLOCK_TOKENS = 512;

  private final String name;
  private final List<TraceRecord> requests;
  private final long promptTokens;
  private final long outputTokens;

  private Workload(String name, List<TraceRecord> requests) {
    List<TraceRecord> sorted = new ArrayList<>(requests);
    sorted.sort(Comparator.comparingDouble(TraceRecord::arrivalMillis)); // stable
    this.name = name;
    this.requests = Collections.unmodifiableList(sorted);
    long p = 0;
    long o = 0;
    for (TraceRecord r : sorted) {
      p += r.inputLength();
      o += r.outputLength();
    }
    this.promptTokens = p;
    this.outputTokens = o;
  }

  /**
   * A Mooncake JSONL trace ({@code timestamp} ms, {@code input_length}, {@code output_length},
   * {@code hash_ids} of 512-token blocks); {@code .gz} files are decompressed.
   *
   * @throws TraceFormatException naming the file, line and field when it is not in that format
   */
  public static Workload mooncakeTrace(Path file) {
    return mooncakeTrace(file, MOONCAKE_BLOCK_TOKENS);
  }

  /** A Mooncake-format trace whose hash ids stand for {@code blockTokens} tokens each. */
  public static Workload mooncakeTrace(Path file, int blockTokens) {
    Objects.requireNonNull(file, "file");
    if (blockTokens < 1) {
      throw new IllegalArgumentException("blockTokens must be >= 1, was " + blockTokens);
    }
    try (InputStream raw = Files.newInputStream(file);
        InputStream in =
            file.getFileName().toString().endsWith(".gz") ? new GZIPInputStream(raw, 65536) : raw;
        BufferedReader r =
            new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8), 65536)) {
      return new Workload(
          file.getFileName().toString(),
          MooncakeTraceReader.read(r, file.getFileName().toString(), blockTokens));
    } catch (IOException e) {
      throw new TraceFormatException(file + ": cannot read: " + e.getMessage(), e);
    }
  }

  /** A Mooncake-format trace read from {@code in} ({@code source} names it in messages). */
  public static Workload mooncakeTrace(BufferedReader in, String source) {
    return new Workload(source, MooncakeTraceReader.read(in, source, MOONCAKE_BLOCK_TOKENS));
  }

  /**
   * inference-perf's shared-prefix shape: prompts shuffled once with {@code seed}, sent in a cycle
   * with Poisson arrivals (see {@link SharedPrefix}).
   */
  public static Workload sharedPrefix(SharedPrefix shape, long seed) {
    Objects.requireNonNull(shape, "shape");
    SplittableRandom rnd = new SplittableRandom(seed);
    int n = shape.groups() * shape.promptsPerGroup();
    int[] order = new int[n];
    for (int i = 0; i < n; i++) {
      order[i] = i;
    }
    for (int i = n - 1; i > 0; i--) { // Fisher-Yates, as random.shuffle
      int j = rnd.nextInt(i + 1);
      int t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    List<TraceRecord> out = new ArrayList<>(shape.requests());
    double t = 0;
    int input = shape.systemPromptLength() + shape.questionLength();
    for (int k = 0; k < shape.requests(); k++) {
      int prompt = order[k % n];
      int group = prompt / shape.promptsPerGroup();
      long system = (1L << 40) | group;
      long question = (2L << 40) | prompt;
      long[] ids;
      int[] lens;
      if (shape.systemPromptLength() == 0) {
        ids = new long[] {question};
        lens = new int[] {shape.questionLength()};
      } else {
        ids = new long[] {system, question};
        lens = new int[] {shape.systemPromptLength(), shape.questionLength()};
      }
      out.add(new TraceRecord(t, input, shape.outputLength(), ids, lens));
      t += -Math.log(1 - rnd.nextDouble()) / shape.rate() * 1000;
    }
    return new Workload(shape.toString(), out);
  }

  /**
   * The same requests, each given one of {@code classes} at random in proportion to their shares
   * (seeded: the same seed, the same assignment): a generator of priority, tenant and SLO mixes for
   * flow control. Replaces any annotations the trace carried.
   *
   * @throws IllegalArgumentException when {@code classes} is empty or names a class twice
   */
  public Workload withClasses(List<RequestClass> classes, long seed) {
    Objects.requireNonNull(classes, "classes");
    if (classes.isEmpty()) {
      throw new IllegalArgumentException("classes must not be empty");
    }
    double[] cum = new double[classes.size()];
    TraceRecord.Tag[] tags = new TraceRecord.Tag[classes.size()];
    java.util.Set<String> names = new java.util.HashSet<>();
    double sum = 0;
    for (int k = 0; k < classes.size(); k++) {
      RequestClass c = classes.get(k);
      if (!names.add(c.name())) {
        throw new IllegalArgumentException("class " + c.name() + " is given twice");
      }
      sum += c.share();
      cum[k] = sum;
      tags[k] = new TraceRecord.Tag(c.name(), c.priority(), c.tenant(), c.slo());
    }
    SplittableRandom rnd = new SplittableRandom(seed ^ 0x5DEECE66DL);
    List<TraceRecord> out = new ArrayList<>(requests.size());
    for (TraceRecord r : requests) {
      double x = rnd.nextDouble() * sum;
      int k = 0;
      while (k < cum.length - 1 && x >= cum[k]) {
        k++;
      }
      out.add(r.withTag(tags[k]));
    }
    StringBuilder label = new StringBuilder(name).append(" classes ");
    for (int k = 0; k < classes.size(); k++) {
      label.append(k == 0 ? "" : "/").append(classes.get(k).name());
    }
    return new Workload(label.toString(), out);
  }

  /** A name for reports (the trace's file name, or the shape). */
  public String name() {
    return name;
  }

  /** Number of requests. */
  public int size() {
    return requests.size();
  }

  /** Milliseconds from the first arrival to the last. */
  public double durationMillis() {
    return requests.get(requests.size() - 1).arrivalMillis() - requests.get(0).arrivalMillis();
  }

  /** Prompt tokens in all. */
  public long promptTokens() {
    return promptTokens;
  }

  /** Output tokens in all. */
  public long outputTokens() {
    return outputTokens;
  }

  /** The first {@code n} requests (a slice for quick runs). */
  public Workload first(int n) {
    if (n < 1) {
      throw new IllegalArgumentException("n must be >= 1, was " + n);
    }
    return new Workload(name, requests.subList(0, Math.min(n, requests.size())));
  }

  /** The requests, in arrival order (for the replay engine). */
  List<TraceRecord> records() {
    return requests;
  }

  @Override
  public String toString() {
    return name + " (" + requests.size() + " requests)";
  }
}
