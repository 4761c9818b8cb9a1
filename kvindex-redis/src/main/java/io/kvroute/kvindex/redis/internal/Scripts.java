package io.kvroute.kvindex.redis.internal;

import io.lettuce.core.RedisFuture;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.function.Function;

/**
 * The Lua scripts (resources next to this class), their SHA-1 digests and loading. Immutable.
 *
 * <p>In a Cluster every script touches the keys of one hash tag only (one slot), declared or not:
 * Redis runs it on the shard of its first key.
 */
final class Scripts {
  enum Script {
    WRITE("write.lua", "prelude.lua"),
    REGISTER("register.lua", "prelude.lua"),
    LOOKUP("lookup.lua", "prelude.lua"),
    TOUCH("touch.lua", "prelude.lua"),
    LEASE("lease.lua", "prelude.lua"),
    FLEET_LOAD("fleet-load.lua", "fleet-prelude.lua"),
    FLEET_VIEW("fleet-view.lua", "fleet-prelude.lua"),
    FLEET_SPEC("fleet-spec.lua", "fleet-prelude.lua");

    final String resource;
    final String prelude;

    Script(String resource, String prelude) {
      this.resource = resource;
      this.prelude = prelude;
    }
  }

  private final String[] source = new String[Script.values().length];
  private final String[] sha = new String[Script.values().length];

  Scripts() {
    for (Script s : Script.values()) {
      String text = read(s.prelude) + "\n" + read(s.resource);
      source[s.ordinal()] = text;
      sha[s.ordinal()] = sha1(text);
    }
  }

  /**
   * Loads every script (after a connect, or after NOSCRIPT: the server restarted) with {@code
   * loader} (SCRIPT LOAD; on a Cluster connection, on every node).
   */
  void load(Function<byte[], String> loader) {
    for (Script s : Script.values()) {
      loader.apply(source[s.ordinal()].getBytes(StandardCharsets.UTF_8));
    }
  }

  <T> RedisFuture<T> call(
      RedisClusterAsyncCommands<byte[], byte[]> c,
      Script s,
      ScriptOutputType type,
      byte[][] keys,
      byte[]... args) {
    return c.evalsha(sha[s.ordinal()], type, keys, args);
  }

  /** The script sent whole ({@code EVAL}): for a node that does not have it cached. */
  <T> RedisFuture<T> eval(
      RedisClusterAsyncCommands<byte[], byte[]> c,
      Script s,
      ScriptOutputType type,
      byte[][] keys,
      byte[]... args) {
    return c.eval(source[s.ordinal()].getBytes(StandardCharsets.UTF_8), type, keys, args);
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
