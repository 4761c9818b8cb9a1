package io.kvroute.cli;

import io.kvroute.kvindex.hash.BlockExtraKeys;
import io.kvroute.kvindex.hash.BlockHash;
import io.kvroute.kvindex.hash.HashAlgorithm;
import io.kvroute.kvindex.hash.VllmBlockHasher;
import java.io.PrintWriter;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code kvroute hash}: vLLM's prefix-cache block hashes of a token sequence, one line per full
 * block (digest hex and the event integer form), or a JSON array with {@code --json}.
 */
@Command(
    name = "hash",
    mixinStandardHelpOptions = true,
    header = "Prints vLLM's prefix-cache block hashes of a token sequence.",
    description =
        "One line per full block with the digest in hex and the u64 KV-event form (unsigned decimal). A trailing partial block is not hashed, as in vLLM; fewer tokens than one block is an error.")
final class HashCommand implements Callable<Integer> {

  @Option(
      names = "--algo",
      defaultValue = "sha256",
      description = "sha256 (vLLM default), sha256_cbor, sha256_cbor_64bit, xxhash, xxhash_cbor")
  String algo;

  @Option(names = "--block-size", defaultValue = "16", description = "Tokens per block")
  int blockSize;

  @Option(
      names = "--hash-seed",
      description = {
        "vLLM's PYTHONHASHSEED value (e.g. 0). Default: unset, as in a default vLLM, whose",
        "NONE_HASH seed is then \"" + VllmBlockHasher.DEFAULT_NONE_HASH_SEED + "\" for sha256 and",
        "sha256_cbor; xxhash and xxhash_cbor are random per vLLM process without it."
      })
  String hashSeed;

  @Option(
      names = "--lora",
      description = "LoRA adapter name (lora_request.lora_name; default: none)")
  String lora;

  @Option(
      names = "--cache-salt",
      description = "Cache salt, mixed into the first block (default: none)")
  String cacheSalt;

  @Option(
      names = "--tokens",
      required = true,
      description = "Token ids, comma separated, e.g. 1,2,3")
  String tokens;

  @Option(names = "--json", description = "Print a JSON array instead of lines")
  boolean json;

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  @Override
  public Integer call() {
    HashAlgorithm algorithm;
    try {
      algorithm = HashAlgorithm.fromVllmName(algo);
    } catch (IllegalArgumentException e) {
      throw new CommandLine.ParameterException(spec.commandLine(), "--algo: " + e.getMessage());
    }
    if (blockSize <= 0) {
      throw new CommandLine.ParameterException(
          spec.commandLine(), "--block-size must be > 0, was " + blockSize);
    }
    int[] ids = parseTokens(tokens);
    VllmBlockHasher hasher;
    try {
      hasher =
          VllmBlockHasher.builder()
              .algorithm(algorithm)
              .blockSize(blockSize)
              .hashSeed(hashSeed) // null: vLLM's default for the algorithm
              .build();
    } catch (IllegalArgumentException e) {
      throw new CommandLine.ParameterException(
          spec.commandLine(), "--hash-seed: " + e.getMessage());
    }
    if (ids.length < blockSize) {
      throw new CommandLine.ParameterException(
          spec.commandLine(),
          "--tokens: "
              + ids.length
              + " token(s) is fewer than one block of "
              + blockSize
              + "; vLLM hashes full blocks only, so there is nothing to print");
    }
    BlockExtraKeys extras = BlockExtraKeys.builder().loraName(lora).cacheSalt(cacheSalt).build();
    List<BlockHash> hashes = hasher.hashBlocks(ids, extras);
    PrintWriter out = spec.commandLine().getOut();
    if (json) {
      StringBuilder sb = new StringBuilder("[");
      for (int i = 0; i < hashes.size(); i++) {
        BlockHash h = hashes.get(i);
        sb.append(i == 0 ? "" : ",")
            .append("{\"block\":")
            .append(i)
            .append(",\"digest_hex\":\"")
            .append(h.hex())
            .append("\",\"u64\":\"")
            .append(h.u64String())
            .append("\"}");
      }
      out.println(sb.append(']'));
    } else {
      for (BlockHash h : hashes) {
        out.println(h.hex() + " " + h.u64String());
      }
    }
    out.flush();
    return 0;
  }

  private int[] parseTokens(String text) {
    String t = text.trim();
    if (t.isEmpty()) {
      return new int[0];
    }
    String[] parts = t.split(",", -1);
    int[] ids = new int[parts.length];
    for (int i = 0; i < parts.length; i++) {
      String p = parts[i].trim();
      try {
        ids[i] = Integer.parseInt(p);
      } catch (NumberFormatException e) {
        throw new CommandLine.ParameterException(
            spec.commandLine(), "--tokens: token " + (i + 1) + " is not an integer: \"" + p + "\"");
      }
      if (ids[i] < 0) {
        throw new CommandLine.ParameterException(
            spec.commandLine(), "--tokens: token " + (i + 1) + " is negative: " + ids[i]);
      }
    }
    return ids;
  }
}
