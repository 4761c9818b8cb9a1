package io.kvroute.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** {@code kvroute hash} against the golden vectors (sha256 and sha256_cbor, seed 0). */
class HashCommandTest {
  private static final String TOKENS =
      "0,1,23,24,255,256,65535,65536,128000,151935,42,9125,271,100,2,151643";

  private String out;
  private String err;

  private int run(String... args) {
    PrintStream oldOut = System.out;
    PrintStream oldErr = System.err;
    ByteArrayOutputStream o = new ByteArrayOutputStream();
    ByteArrayOutputStream e = new ByteArrayOutputStream();
    try {
      System.setOut(new PrintStream(o, true, StandardCharsets.UTF_8));
      System.setErr(new PrintStream(e, true, StandardCharsets.UTF_8));
      return Main.run(args);
    } finally {
      System.setOut(oldOut);
      System.setErr(oldErr);
      out = o.toString(StandardCharsets.UTF_8);
      err = e.toString(StandardCharsets.UTF_8);
    }
  }

  @Test
  void printsDigestAndEventFormPerFullBlock() {
    // 16 tokens + 3 trailing: one full block
    assertThat(run("hash", "--hash-seed", "0", "--tokens", TOKENS + ",1,2,3")).isZero();
    assertThat(out.trim())
        .isEqualTo(
            "5e87e007d13700d8d84f4b62f801be6afd4fc8d28289aeaa5911de863aaef9fc"
                + " 6418155612071197180");
    assertThat(run("hash", "--algo", "sha256_cbor", "--hash-seed", "0", "--tokens", TOKENS))
        .isZero();
    assertThat(out.trim()).endsWith(" 9453933663683478973");
  }

  @Test
  void jsonOutput() {
    assertThat(
            run("hash", "--algo", "sha256_cbor", "--hash-seed", "0", "--tokens", TOKENS, "--json"))
        .isZero();
    assertThat(out.trim())
        .startsWith("[{\"block\":0,\"digest_hex\":\"2491bbb9")
        .endsWith("\",\"u64\":\"9453933663683478973\"}]");
    assertThat(run("hash", "--hash-seed", "0", "--tokens", "1,2", "--json")).isEqualTo(2);
    assertThat(err.trim())
        .isEqualTo(
            "kvroute hash: --tokens: 2 token(s) is fewer than one block of 16; vLLM hashes full"
                + " blocks only, so there is nothing to print (see kvroute hash --help)");
  }

  @Test
  void loraAndSaltChangeTheHash() {
    run("hash", "--hash-seed", "0", "--tokens", TOKENS);
    String plain = out;
    run("hash", "--hash-seed", "0", "--tokens", TOKENS, "--lora", "my-lora");
    String lora = out;
    run("hash", "--hash-seed", "0", "--tokens", TOKENS, "--cache-salt", "salt-1");
    assertThat(lora).isNotEqualTo(plain);
    assertThat(out).isNotEqualTo(plain).isNotEqualTo(lora);
  }

  @Test
  void badInputGivesClearErrors() {
    assertThat(run("hash", "--hash-seed", "0", "--tokens", "1,x,3")).isEqualTo(2);
    assertThat(err).contains("--tokens: token 2 is not an integer: \"x\"");
    assertThat(run("hash", "--hash-seed", "0", "--algo", "md5", "--tokens", "1")).isEqualTo(2);
    assertThat(err).contains("unknown hash algorithm \"md5\"; known: sha256, sha256_cbor");
    assertThat(run("hash", "--hash-seed", "0", "--block-size", "0", "--tokens", "1")).isEqualTo(2);
    assertThat(err).contains("--block-size must be > 0, was 0");
    assertThat(run("hash", "--tokens", "1")).isEqualTo(2);
    assertThat(err).contains("--hash-seed");
  }
}
