package io.kvroute.tokenizer.hf;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

/**
 * The reference vectors in {@code reference-vectors.json} (see the README next to it): token ids
 * and rendered chat prompts computed by Hugging Face's JavaScript implementation.
 */
public final class ReferenceVectors {
  private ReferenceVectors() {}

  /** One case: a completion prompt or a chat request, with its expected output. */
  public record Case(String id, String tokenizer, JsonNode json) {
    public boolean isChat() {
      return json.path("kind").asText().equals("chat");
    }

    /**
     * True when {@code ids} are the expected ids (compared in full, or by digest for long ones).
     */
    public boolean matches(int[] ids) {
      return describeMismatch(ids) == null;
    }

    /** Null when {@code ids} match, else a description of the first difference. */
    public String describeMismatch(int[] ids) {
      if (json.has("ids")) {
        JsonNode exp = json.get("ids");
        for (int i = 0; i < Math.max(exp.size(), ids.length); i++) {
          int e = i < exp.size() ? exp.get(i).intValue() : -1;
          int a = i < ids.length ? ids[i] : -1;
          if (e != a) {
            return "first difference at "
                + i
                + ": expected "
                + e
                + ", got "
                + a
                + " (expected "
                + exp.size()
                + " ids, got "
                + ids.length
                + ")";
          }
        }
        return null;
      }
      if (ids.length != json.get("count").intValue()) {
        return "expected " + json.get("count").intValue() + " ids, got " + ids.length;
      }
      JsonNode head = json.get("ids_head");
      for (int i = 0; i < head.size(); i++) {
        if (head.get(i).intValue() != ids[i]) {
          return "head differs at "
              + i
              + ": expected "
              + head.get(i).intValue()
              + ", got "
              + ids[i];
        }
      }
      return sha(ids).equals(json.get("ids_sha256").asText()) ? null : "SHA-256 of ids differs";
    }
  }

  /** All cases, in file order. */
  public static List<Case> all() {
    JsonNode root = root();
    List<Case> out = new ArrayList<>();
    for (JsonNode c : root.get("cases")) {
      out.add(new Case(c.get("id").asText(), c.get("tokenizer").asText(), c));
    }
    return out;
  }

  /** The package versions the vectors were generated with. */
  public static JsonNode packages() {
    return root().get("packages");
  }

  private static JsonNode root() {
    try (InputStream in = ReferenceVectors.class.getResourceAsStream("reference-vectors.json")) {
      if (in == null) {
        throw new IllegalStateException("reference-vectors.json is not on the class path");
      }
      return new ObjectMapper().readTree(in);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static String sha(int[] ids) {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < ids.length; i++) {
      if (i > 0) {
        sb.append(',');
      }
      sb.append(ids[i]);
    }
    try {
      return HexFormat.of()
          .formatHex(
              MessageDigest.getInstance("SHA-256")
                  .digest(sb.toString().getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
