package io.kvroute.replay.internal;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import io.kvroute.replay.Slo;
import io.kvroute.replay.TraceFormatException;
import java.io.BufferedReader;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Reads Mooncake's JSONL trace format: one object per line with {@code timestamp} (ms; or {@code
 * created_time}), {@code input_length} (or {@code input_tokens}), {@code output_length} (or {@code
 * output_tokens}) and {@code hash_ids} (prefix block ids of {@code blockTokens} tokens each; the
 * last block is usually partial). Optional annotations (kvroute's, for flow control): {@code class}
 * (a name for per-class figures), {@code priority} (integer), {@code tenant}, {@code slo_ttft_ms}
 * and {@code slo_tpot_ms}. Unknown fields are ignored; blank lines are skipped. Stateless.
 */
public final class MooncakeTraceReader {
  private static final JsonFactory JSON = new JsonFactory();

  private MooncakeTraceReader() {}

  /**
   * Reads every request.
   *
   * @param source the file name for messages
   * @param blockTokens tokens per hash id (512 in Mooncake's traces)
   * @throws TraceFormatException naming the line and field of the first problem
   */
  public static List<TraceRecord> read(BufferedReader in, String source, int blockTokens) {
    List<TraceRecord> out = new ArrayList<>();
    int lineNo = 0;
    try {
      for (String line; (line = in.readLine()) != null; ) {
        lineNo++;
        if (line.isBlank()) {
          continue;
        }
        out.add(parse(line, source + ":" + lineNo, blockTokens));
      }
    } catch (IOException e) {
      throw new TraceFormatException(source + ":" + lineNo + ": cannot read: " + e.getMessage(), e);
    }
    if (out.isEmpty()) {
      throw new TraceFormatException(source + ": no requests (expected one JSON object per line)");
    }
    return out;
  }

  private static TraceRecord parse(String line, String where, int blockTokens) {
    double ts = Double.NaN;
    int input = -1;
    int output = -1;
    long[] ids = null;
    String cls = null;
    int priority = 0;
    String tenant = TraceRecord.Tag.NONE.tenant();
    double sloTtft = 0;
    double sloTpot = 0;
    try (JsonParser p = JSON.createParser(line)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        throw new TraceFormatException(where + ": expected a JSON object");
      }
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String f = p.currentName();
        JsonToken v = p.nextToken();
        switch (f) {
          case "timestamp":
          case "created_time":
            ts = number(p, v, where, f);
            break;
          case "input_length":
          case "input_tokens":
            input = count(p, v, where, f);
            break;
          case "output_length":
          case "output_tokens":
            output = count(p, v, where, f);
            break;
          case "hash_ids":
            ids = ids(p, v, where);
            break;
          case "class":
            cls = text(p, v, where, f);
            break;
          case "tenant":
            tenant = text(p, v, where, f);
            break;
          case "priority":
            if (v != JsonToken.VALUE_NUMBER_INT) {
              throw new TraceFormatException(where + ": \"priority\" must be an integer");
            }
            priority = p.getIntValue();
            break;
          case "slo_ttft_ms":
            sloTtft = number(p, v, where, f);
            break;
          case "slo_tpot_ms":
            sloTpot = number(p, v, where, f);
            break;
          default:
            p.skipChildren();
        }
      }
      if (p.nextToken() != null) {
        throw new TraceFormatException(where + ": trailing data after the JSON object");
      }
    } catch (IOException e) {
      throw new TraceFormatException(where + ": not valid JSON: " + e.getMessage(), e);
    }
    if (Double.isNaN(ts)) {
      throw new TraceFormatException(where + ": missing \"timestamp\"");
    }
    if (input < 1) {
      throw new TraceFormatException(where + ": \"input_length\" must be a positive integer");
    }
    if (output < 1) {
      throw new TraceFormatException(where + ": \"output_length\" must be a positive integer");
    }
    if (ids == null) {
      throw new TraceFormatException(where + ": missing \"hash_ids\"");
    }
    int[] lens = new int[ids.length];
    Arrays.fill(lens, blockTokens);
    Slo slo = null;
    if (sloTtft > 0 || sloTpot > 0) {
      slo =
          new Slo(
              sloTtft > 0 ? Duration.ofNanos(Math.round(sloTtft * 1e6)) : Slo.DEFAULT.ttft(),
              sloTpot > 0 ? Duration.ofNanos(Math.round(sloTpot * 1e6)) : Slo.DEFAULT.tpot());
    }
    TraceRecord.Tag tag =
        cls == null && priority == 0 && slo == null && tenant.equals(TraceRecord.Tag.NONE.tenant())
            ? TraceRecord.Tag.NONE
            : new TraceRecord.Tag(cls, priority, tenant, slo);
    return new TraceRecord(ts, input, output, ids, lens, tag);
  }

  private static String text(JsonParser p, JsonToken v, String where, String f) throws IOException {
    if (v != JsonToken.VALUE_STRING || p.getText().isBlank()) {
      throw new TraceFormatException(where + ": \"" + f + "\" must be a non-empty string");
    }
    return p.getText();
  }

  private static double number(JsonParser p, JsonToken v, String where, String f)
      throws IOException {
    if (v != JsonToken.VALUE_NUMBER_INT && v != JsonToken.VALUE_NUMBER_FLOAT) {
      throw new TraceFormatException(where + ": \"" + f + "\" must be a number");
    }
    double d = p.getDoubleValue();
    if (!(d >= 0) || Double.isInfinite(d)) {
      throw new TraceFormatException(where + ": \"" + f + "\" must be >= 0, was " + d);
    }
    return d;
  }

  private static int count(JsonParser p, JsonToken v, String where, String f) throws IOException {
    if (v != JsonToken.VALUE_NUMBER_INT) {
      throw new TraceFormatException(where + ": \"" + f + "\" must be an integer");
    }
    long n = p.getLongValue();
    if (n > Integer.MAX_VALUE) {
      throw new TraceFormatException(where + ": \"" + f + "\" is too large: " + n);
    }
    return (int) n;
  }

  private static long[] ids(JsonParser p, JsonToken v, String where) throws IOException {
    if (v != JsonToken.START_ARRAY) {
      throw new TraceFormatException(where + ": \"hash_ids\" must be an array of integers");
    }
    long[] out = new long[16];
    int n = 0;
    for (JsonToken t; (t = p.nextToken()) != JsonToken.END_ARRAY; ) {
      if (t != JsonToken.VALUE_NUMBER_INT) {
        throw new TraceFormatException(where + ": \"hash_ids\" must be an array of integers");
      }
      if (n == out.length) {
        out = Arrays.copyOf(out, n * 2);
      }
      out[n++] = p.getLongValue();
    }
    return Arrays.copyOf(out, n);
  }
}
