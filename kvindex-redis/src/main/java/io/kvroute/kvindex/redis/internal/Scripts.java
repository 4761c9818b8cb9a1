package io.kvroute.kvindex.redis.internal;

import io.lettuce.core.RedisFuture;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.async.RedisAsyncCommands;
import io.lettuce.core.api.sync.RedisCommands;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/** The Lua scripts (resources next to this class), their SHA-1 digests and loading. Immutable. */
final class Scripts {
  enum Script {
    WRITE("write.lua"),
    REGISTER("register.lua"),
    LOOKUP("lookup.lua"),
    TOUCH("touch.lua"),
    LEASE("lease.lua");

    final String resource;

    Script(String resource) {
      this.resource = resource;
    }
  }

  private final String[] source = new String[Script.values().length];
  private final String[] sha = new String[Script.values().length];

  Scripts() {
    String prelude = read("prelude.lua");
    for (Script s : Script.values()) {
      String text = prelude + "\n" + read(s.resource);
      source[s.ordinal()] = text;
      sha[s.ordinal()] = sha1(text);
    }
  }

  /** Loads every script (after a connect, or after NOSCRIPT: the server restarted). */
  void load(RedisCommands<byte[], byte[]> sync) {
    for (Script s : Script.values()) {
      sync.scriptLoad(source[s.ordinal()]);
    }
  }

  <T> RedisFuture<T> call(
      RedisAsyncCommands<byte[], byte[]> c,
      Script s,
      ScriptOutputType type,
      byte[][] keys,
      byte[]... args) {
    return c.evalsha(sha[s.ordinal()], type, keys, args);
  }

  private static String read(String name) {
    try (InputStream in = Scripts.class.getResourceAsStream(name)) {
      if (in == null) {
        throw new IllegalStateException("missing script resource " + name);
      }
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static String sha1(String text) {
    try {
      MessageDigest md = MessageDigest.getInstance("SHA-1");
      return HexFormat.of().formatHex(md.digest(text.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
