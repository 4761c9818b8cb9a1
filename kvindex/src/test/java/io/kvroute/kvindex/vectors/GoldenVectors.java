package io.kvroute.kvindex.vectors;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;

/**
 * Reads the golden vectors produced by vLLM's own code (see {@code README.md} beside the files in
 * {@code src/test/resources/io/kvroute/kvindex/vectors}) from the class path. They ship in the
 * repository, so the tests never look outside it; other modules reach them through kvindex's
 * test-jar.
 */
public final class GoldenVectors {
  private static final ObjectMapper MAPPER = new ObjectMapper();
  private static final String DIR = "/io/kvroute/kvindex/vectors/";

  private GoldenVectors() {}

  /** Reads one vector file (for example {@code "hash_sha256_seed0.json"}) as a JSON tree. */
  public static JsonNode read(String name) {
    try (InputStream in = GoldenVectors.class.getResourceAsStream(DIR + name)) {
      if (in == null) {
        throw new IllegalArgumentException(
            "no golden vector file "
                + name
                + " on the class path (expected in kvindex/src/test/resources"
                + DIR
                + ")");
      }
      return MAPPER.readTree(in);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read golden vector file " + name, e);
    }
  }

  /** Hex string to bytes. */
  public static byte[] hex(String s) {
    byte[] b = new byte[s.length() / 2];
    for (int i = 0; i < b.length; i++) {
      b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
    }
    return b;
  }

  /** Bytes to lowercase hex. */
  public static String hex(byte[] b) {
    StringBuilder sb = new StringBuilder(b.length * 2);
    for (byte x : b) {
      sb.append(Character.forDigit((x >> 4) & 0xf, 16)).append(Character.forDigit(x & 0xf, 16));
    }
    return sb.toString();
  }
}
