package io.kvroute.kvindex.redis;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * A real Redis Cluster started by a test on loopback: {@code masters} {@code redis-server
 * --cluster-enabled yes} processes joined by {@code redis-cli --cluster create} (slots split in
 * equal ranges), plus optional replicas of the first masters, each in its own temporary directory,
 * without persistence. {@code cluster-node-timeout} is 1 s and {@code
 * cluster-require-full-coverage} off, so a dead master's slots fail while the others keep
 * answering, and a replica takes over within seconds. Tests skip with a message if redis-server or
 * redis-cli is missing (Debian: {@code redis-server}, which brings {@code redis-tools}; CI's {@code
 * .ci/run} installs both).
 */
public final class RedisCluster implements AutoCloseable {
  /** One node: a redis-server process on a port, in its directory. */
  public static final class Node {
    final int port;
    final Path dir;
    Process process;

    /** The master's port for a replica, 0 for a master (as created). */
    final int replicaOf;

    Node(int port, Path dir, int replicaOf) {
      this.port = port;
      this.dir = dir;
      this.replicaOf = replicaOf;
    }

    /** The node's port. */
    public int port() {
      return port;
    }

    /** The process id (while it runs). */
    public long pid() {
      return process.pid();
    }

    /** Whether its process runs. */
    public boolean alive() {
      return process != null && process.isAlive();
    }
  }

  private final Path server;
  private final Path cli;
  private final List<Node> nodes = new ArrayList<>();

  private final String[] extra;

  private RedisCluster(Path server, Path cli, String... extra) {
    this.server = server;
    this.cli = cli;
    this.extra = extra;
  }

  /** redis-cli, if installed. */
  public static Optional<Path> cliBinary() {
    String path = System.getenv("PATH");
    Stream<Path> fromPath =
        path == null
            ? Stream.empty()
            : Stream.of(path.split(":")).map(p -> Paths.get(p, "redis-cli"));
    return Stream.concat(fromPath, Stream.of(Paths.get("/usr/bin/redis-cli")))
        .filter(Files::isExecutable)
        .findFirst();
  }

  /**
   * Starts a cluster of {@code masters} masters and one replica for each of the first {@code
   * replicas} masters, and waits until every node reports {@code cluster_state:ok}; skips the test
   * if the binaries are missing.
   */
  public static RedisCluster start(int masters, int replicas) {
    assumeTrue(
        RedisServer.binary().isPresent() && cliBinary().isPresent(),
        "redis-server and redis-cli are not installed (apt-get install -y redis-server"
            + " redis-tools): Redis Cluster tests skipped");
    return create(masters, replicas);
  }

  /**
   * {@link #start} outside JUnit (the benchmarks): the same cluster, or an {@link
   * IllegalStateException} if the binaries are missing. Extra server arguments (such as {@code
   * --maxmemory 2gb}) are passed to every node.
   */
  public static RedisCluster create(int masters, int replicas, String... extra) {
    Optional<Path> srv = RedisServer.binary();
    Optional<Path> cli = cliBinary();
    if (srv.isEmpty() || cli.isEmpty()) {
      throw new IllegalStateException(
          "redis-server and redis-cli are not installed: apt-get install -y redis-server"
              + " redis-tools");
    }
    RedisCluster c = new RedisCluster(srv.get(), cli.get(), extra);
    try {
      for (int i = 0; i < masters; i++) {
        c.nodes.add(c.launch(new Node(freeClusterPort(), tempDir(), 0)));
      }
      List<String> create = new ArrayList<>(List.of(cli.get().toString(), "--cluster", "create"));
      for (Node n : c.nodes) {
        create.add("127.0.0.1:" + n.port);
      }
      create.addAll(List.of("--cluster-replicas", "0", "--cluster-yes"));
      c.run(create);
      for (int i = 0; i < replicas; i++) {
        Node master = c.nodes.get(i);
        Node r = c.launch(new Node(freeClusterPort(), tempDir(), master.port));
        c.nodes.add(r);
        String id = c.cli(master.port, "cluster", "myid").trim();
        c.cli(r.port, "cluster", "meet", "127.0.0.1", Integer.toString(master.port));
        c.awaitCondition(
            "replica " + r.port + " to learn master " + master.port,
            () -> c.cli(r.port, "cluster", "nodes").contains(id));
        c.cli(r.port, "cluster", "replicate", id);
      }
      c.awaitOk();
      for (int i = 0; i < replicas; i++) {
        Node r = c.nodes.get(masters + i);
        c.awaitCondition(
            "replica " + r.port + " to sync",
            () -> c.cli(r.port, "info", "replication").contains("master_link_status:up"));
      }
      return c;
    } catch (RuntimeException e) {
      c.close();
      throw e;
    }
  }

  private static Path tempDir() {
    try {
      return Files.createTempDirectory("kvroute-cluster-");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** A free port whose cluster bus port (+10000) is free too. */
  private static int freeClusterPort() {
    for (int attempt = 0; attempt < 200; attempt++) {
      int p = ThreadLocalRandom.current().nextInt(20_000, 50_000);
      if (free(p) && free(p + 10_000)) {
        return p;
      }
    }
    throw new IllegalStateException("no free port pair for a cluster node");
  }

  private static boolean free(int port) {
    try (ServerSocket s = new ServerSocket(port, 1, InetAddress.getLoopbackAddress())) {
      return s.getLocalPort() == port;
    } catch (IOException e) {
      return false;
    }
  }

  private Node launch(Node n) {
    List<String> args =
        new ArrayList<>(
            List.of(
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "1000",
                "--cluster-require-full-coverage",
                "no",
                "--cluster-replica-validity-factor",
                "0"));
    args.addAll(List.of(extra));
    List<String> cmd = RedisServer.commandLine(server, n.port, n.dir, args.toArray(new String[0]));
    try {
      n.process =
          new ProcessBuilder(cmd)
              .redirectErrorStream(true)
              .redirectOutput(ProcessBuilder.Redirect.appendTo(n.dir.resolve("redis.log").toFile()))
              .start();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    awaitCondition(
        "node " + n.port + " to answer PING",
        () -> {
          if (!n.process.isAlive()) {
            throw new IllegalStateException("redis-server " + n.port + " exited: " + log(n));
          }
          return cli(n.port, "ping").trim().equals("PONG");
        });
    return n;
  }

  private static String log(Node n) {
    try {
      return Files.readString(n.dir.resolve("redis.log"));
    } catch (IOException e) {
      return "(no log)";
    }
  }

  /** The seed URLs of every node, comma-separated (for {@code RedisIndexConfig.url}). */
  public String url() {
    return nodes.stream().map(n -> "redis://127.0.0.1:" + n.port).collect(Collectors.joining(","));
  }

  /** The nodes, masters first (as created). */
  public List<Node> nodes() {
    return List.copyOf(nodes);
  }

  /** The node currently serving {@code slot} as master (asked of a live node). */
  public Node masterOf(int slot) {
    for (Node asker : nodes) {
      if (!asker.alive()) {
        continue;
      }
      for (String line : cli(asker.port, "cluster", "nodes").split("\n")) {
        String[] f = line.trim().split(" ");
        if (f.length < 9 || !f[2].contains("master") || f[2].contains("fail")) {
          continue;
        }
        for (int i = 8; i < f.length; i++) {
          String range = f[i];
          if (range.startsWith("[")) {
            continue;
          }
          int dash = range.indexOf('-');
          int lo = Integer.parseInt(dash < 0 ? range : range.substring(0, dash));
          int hi = dash < 0 ? lo : Integer.parseInt(range.substring(dash + 1));
          if (slot >= lo && slot <= hi) {
            int port = Integer.parseInt(f[1].substring(f[1].indexOf(':') + 1, f[1].indexOf('@')));
            return nodes.stream().filter(n -> n.port == port).findFirst().orElseThrow();
          }
        }
      }
      break;
    }
    throw new IllegalStateException("no master serves slot " + slot);
  }

  /** The slot of a key (or a hash tag), as the cluster computes it. */
  public int slot(String key) {
    for (Node n : nodes) {
      if (n.alive()) {
        return Integer.parseInt(cli(n.port, "cluster", "keyslot", key).trim());
      }
    }
    throw new IllegalStateException("no live node");
  }

  /** Kills a node's process at once (SIGKILL: no goodbye to its clients or peers). */
  public void kill(Node n) {
    if (n.process != null) {
      n.process.destroyForcibly();
      try {
        n.process.waitFor(30, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** Starts a killed node again on its port, from its directory (its cluster config, no data). */
  public void restart(Node n) {
    kill(n);
    launch(n);
  }

  /** Waits until every live node reports {@code cluster_state:ok}. */
  public void awaitOk() {
    awaitCondition(
        "cluster_state:ok on every live node",
        () -> {
          for (Node n : nodes) {
            if (n.alive() && !cli(n.port, "cluster", "info").contains("cluster_state:ok")) {
              return false;
            }
          }
          return true;
        });
  }

  /** Waits until {@code slot} is served by a live master other than {@code dead}. */
  public Node awaitFailover(int slot, Node dead) {
    Node[] found = {null};
    awaitCondition(
        "slot " + slot + " to be served by a live master",
        () -> {
          try {
            Node m = masterOf(slot);
            if (m != dead && m.alive()) {
              found[0] = m;
              return true;
            }
          } catch (RuntimeException e) {
            // not yet
          }
          return false;
        });
    return found[0];
  }

  /** Runs redis-cli against a node; its output. */
  public String cli(int port, String... args) {
    List<String> cmd = new ArrayList<>(List.of(cli.toString(), "-h", "127.0.0.1", "-p", "" + port));
    cmd.addAll(List.of(args));
    return run(cmd);
  }

  private String run(List<String> cmd) {
    try {
      Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
      String out =
          new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
      if (!p.waitFor(60, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        throw new IllegalStateException("timed out: " + cmd);
      }
      if (p.exitValue() != 0) {
        throw new IllegalStateException(cmd + " failed: " + out);
      }
      return out;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  private void awaitCondition(String what, java.util.function.BooleanSupplier condition) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
    while (true) {
      boolean ok;
      try {
        ok = condition.getAsBoolean();
      } catch (IllegalStateException e) {
        if (e.getMessage() != null && e.getMessage().contains("exited")) {
          throw e;
        }
        ok = false;
      }
      if (ok) {
        return;
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("timed out after 90 s waiting for " + what);
      }
      try {
        Thread.sleep(50); // polling interval while waiting for a condition, not synchronisation
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException(e);
      }
    }
  }

  @Override
  public void close() {
    for (Node n : nodes) {
      kill(n);
      try (Stream<Path> files = Files.walk(n.dir)) {
        files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      } catch (IOException e) {
        // left in the temp dir
      }
    }
  }
}
