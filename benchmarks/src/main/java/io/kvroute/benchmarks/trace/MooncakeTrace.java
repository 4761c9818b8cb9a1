package io.kvroute.benchmarks.trace;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.zip.GZIPInputStream;

/**
 * A request trace in the Mooncake format (one JSON object per line: {@code timestamp} in ms from
 * the start, or {@code delay} in ms since the previous line; {@code input_length}, {@code
 * output_length}; {@code hash_ids}, the remapped prefix block ids). A small reader of its own (the
 * {@code replay} module has the general one): it reads exactly these fields and ignores others.
 * Files ending in {@code .gz} are decompressed. Immutable.
 */
final class MooncakeTrace {
  /** The trace bundled with the benchmarks (see the README beside it). */
  static final String BUNDLED = "/traces/mooncake/synthetic_trace.jsonl.gz";

  /** One request: arrival time (ms), token counts, prefix block ids. */
  record Request(long timestampMs, int inputLength, int outputLength, long[] hashIds) {}

  final String source;
  final List<Request> requests;

  private MooncakeTrace(String source, List<Request> requests) {
    this.source = source;
    this.requests = List.copyOf(requests);
  }

  /** Reads {@code file}, or the bundled trace when {@code file} is null. */
  static MooncakeTrace read(Path file) throws IOException {
    if (file == null) {
      try (InputStream in = MooncakeTrace.class.getResourceAsStream(BUNDLED)) {
        if (in == null) {
          throw new IOException("the bundled trace " + BUNDLED + " is missing from the jar");
        }
        return parse("bundled " + BUNDLED, new GZIPInputStream(in));
      }
    }
    try (InputStream raw = Files.newInputStream(file)) {
      InputStream in = file.toString().endsWith(".gz") ? new GZIPInputStream(raw) : raw;
      return parse(file.toString(), in);
    }
  }

  private static MooncakeTrace parse(String source, InputStream in) throws IOException {
    List<Request> out = new ArrayList<>();
    BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
    long cursor = 0;
    int lineNo = 0;
    for (String line = r.readLine(); line != null; line = r.readLine()) {
      lineNo++;
      if (line.isBlank()) {
        continue;
      }
      try {
        if (field(line, "timestamp") >= 0) {
          cursor = (long) number(line, "timestamp", 0);
        } else {
          cursor += (long) number(line, "delay", 0);
        }
        int input = (int) number(line, "input_length", 0);
        int output = (int) number(line, "output_length", 0);
        out.add(new Request(cursor, input, output, ids(line)));
      } catch (RuntimeException e) {
        throw new IOException(source + ":" + lineNo + ": not a Mooncake trace line: " + e, e);
      }
    }
    if (out.isEmpty()) {
      throw new IOException(source + ": no requests");
    }
    return new MooncakeTrace(source, out);
  }

  /** The index just after {@code "name":} in {@code line}, or -1. */
  private static int field(String line, String name) {
    int i = line.indexOf('"' + name + '"');
    if (i < 0) {
      return -1;
    }
    i = line.indexOf(':', i + name.length() + 2);
    return i < 0 ? -1 : i + 1;
  }

  private static double number(String line, String name, double absent) {
    int i = field(line, name);
    if (i < 0) {
      return absent;
    }
    int end = i;
    while (end < line.length() && ",}]".indexOf(line.charAt(end)) < 0) {
      end++;
    }
    return Double.parseDouble(line.substring(i, end).trim());
  }

  private static long[] ids(String line) {
    int i = field(line, "hash_ids");
    if (i < 0) {
      throw new IllegalArgumentException("no hash_ids");
    }
    int open = line.indexOf('[', i);
    int close = line.indexOf(']', open);
    long[] ids = new long[16];
    int n = 0;
    long v = 0;
    boolean in = false;
    for (int k = open + 1; k < close; k++) {
      char c = line.charAt(k);
      if (c >= '0' && c <= '9') {
        v = v * 10 + (c - '0');
        in = true;
      } else if (in) {
        if (n == ids.length) {
          ids = Arrays.copyOf(ids, n * 2);
        }
        ids[n++] = v;
        v = 0;
        in = false;
      }
    }
    if (in) {
      if (n == ids.length) {
        ids = Arrays.copyOf(ids, n + 1);
      }
      ids[n++] = v;
    }
    return Arrays.copyOf(ids, n);
  }
}
