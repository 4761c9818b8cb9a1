package io.kvroute.cli;

import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventCodec;
import io.kvroute.kvindex.event.KvEventDecodeException;
import io.kvroute.kvindex.event.KvEventSink;
import io.kvroute.kvindex.zmq.KvEventListener;
import io.kvroute.kvindex.zmq.KvEventSubscriber;
import io.kvroute.kvindex.zmq.PodEndpoint;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code kvroute events}: decode vLLM/SGLang KV-event payloads and tail live ZMQ streams.
 *
 * <p>Not thread-safe; one instance per invocation.
 */
@Command(
    name = "events",
    mixinStandardHelpOptions = true,
    header = "Decodes and tails vLLM/SGLang KV-cache events (ZMQ + msgpack).",
    subcommands = {EventsCommand.Decode.class, EventsCommand.Tail.class})
final class EventsCommand implements Runnable {

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  @Override
  public void run() {
    spec.commandLine().usage(spec.commandLine().getOut());
  }

  /** {@code kvroute events decode [FILE|-]}: one payload to JSON. */
  @Command(
      name = "decode",
      mixinStandardHelpOptions = true,
      header = "Decodes one KVEventBatch payload and prints it as JSON.",
      description =
          "The payload is hex (or raw bytes with --raw), read from FILE or from standard input when FILE is -. Hashes are printed as unsigned decimal strings. A file that cannot be read, input that is not hex and a malformed payload are errors with exit code 2.")
  static final class Decode implements Callable<Integer> {

    @Parameters(
        index = "0",
        paramLabel = "FILE|-",
        description = "The payload file, or - to read standard input")
    String file;

    @Option(names = "--raw", description = "Input is raw msgpack bytes, not hex")
    boolean raw;

    @Option(names = "--sglang", description = "SGLang dialect (array positions after medium)")
    boolean sglang;

    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
      PrintWriter out = spec.commandLine().getOut();
      byte[] input;
      try {
        input = "-".equals(file) ? readAll(System.in) : Files.readAllBytes(Path.of(file));
      } catch (java.nio.file.NoSuchFileException e) {
        throw new Main.CliException("cannot read " + file + ": no such file");
      } catch (IOException e) {
        throw new Main.CliException("cannot read " + file + ": " + e.getMessage());
      }
      byte[] payload;
      if (raw) {
        payload = input;
      } else {
        try {
          payload = parseHex(new String(input, java.nio.charset.StandardCharsets.US_ASCII));
        } catch (IllegalArgumentException e) {
          throw new Main.CliException(
              "input is not hex: " + e.getMessage() + " (use --raw for binary input)");
        }
      }
      try {
        KvEventBatch batch =
            KvEventCodec.decode(
                payload,
                0,
                payload.length,
                sglang ? KvEventCodec.Dialect.SGLANG : KvEventCodec.Dialect.VLLM);
        String json = batch.toJson();
        out.println(
            "{\"schema\":\""
                + batch.schema()
                + "\",\"unknown_events\":"
                + batch.unknownEvents()
                + ","
                + json.substring(1));
        out.flush();
        return 0;
      } catch (KvEventDecodeException e) {
        throw new Main.CliException("malformed payload: " + e.getMessage());
      }
    }

    private static byte[] readAll(InputStream in) throws IOException {
      return in.readAllBytes();
    }

    static byte[] parseHex(String s) {
      String h = s.replaceAll("\\s+", "");
      if (h.startsWith("0x") || h.startsWith("0X")) {
        h = h.substring(2);
      }
      if (h.length() % 2 != 0) {
        throw new IllegalArgumentException("odd number of hex digits (" + h.length() + ")");
      }
      byte[] b = new byte[h.length() / 2];
      for (int i = 0; i < b.length; i++) {
        int hi = Character.digit(h.charAt(2 * i), 16);
        int lo = Character.digit(h.charAt(2 * i + 1), 16);
        if (hi < 0 || lo < 0) {
          throw new IllegalArgumentException("bad hex digit near position " + 2 * i);
        }
        b[i] = (byte) (hi << 4 | lo);
      }
      return b;
    }
  }

  /** {@code kvroute events tail}: print a live stream as JSON lines. */
  @Command(
      name = "tail",
      mixinStandardHelpOptions = true,
      header = "Follows a live KV-event publisher and prints each batch as one JSON line.",
      description = {
        "Each line holds seq, topic, pod, ts, dp_rank and events. Gaps, replays, restarts and dropped"
            + " payloads are noted on stderr. Stops on SIGINT/SIGTERM, or after --count batches.",
        "When the stream goes quiet after a batch, an empty line follows (after 0.1, 0.3, 1 and 3 s"
            + " of quiet; --no-keep-alive turns it off): a reader that waits for the pipe to be"
            + " readable and then reads one line through a buffer (select() and readline()) would"
            + " otherwise keep the last lines of a burst in its buffer until the next batch."
      })
  static final class Tail implements Callable<Integer> {

    @Option(
        names = "--endpoint",
        required = true,
        description = "PUB endpoint to connect to, e.g. tcp://10.0.0.7:5557")
    String endpoint;

    @Option(
        names = "--replay",
        description = "ROUTER replay endpoint, e.g. tcp://10.0.0.7:5558 (default: none, no replay)")
    String replay;

    @Option(
        names = "--topic",
        defaultValue = "",
        description = "Topic prefix filter (default: all)")
    String topic;

    @Option(names = "--pod", defaultValue = "pod", description = "Pod id to report (default: pod)")
    String pod;

    @Option(names = "--dp-size", defaultValue = "1", description = "Data-parallel ranks (ports +r)")
    int dpSize;

    @Option(names = "--count", defaultValue = "0", description = "Exit after N batches (0: never)")
    long count;

    @Option(names = "--sglang", description = "SGLang dialect")
    boolean sglang;

    @Option(
        names = "--keep-alive",
        negatable = true,
        defaultValue = "true",
        fallbackValue = "true",
        description =
            "Write an empty line when the stream goes quiet after a batch (default: on; see above)")
    boolean keepAlive;

    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    private final CountDownLatch done = new CountDownLatch(1);

    /** Set while running; tests use it to know the subscriber is up. */
    volatile KvEventSubscriber running;

    /** Stops the tail (as SIGINT does). */
    void stop() {
      done.countDown();
    }

    @Override
    public Integer call() throws InterruptedException {
      PrintWriter out = spec.commandLine().getOut();
      PrintWriter err = spec.commandLine().getErr();
      io.kvroute.config.Checks.zmqEndpoint("--endpoint", endpoint);
      if (replay != null) {
        io.kvroute.config.Checks.zmqEndpoint("--replay", replay);
      }
      AtomicLong printed = new AtomicLong();
      KeepAlive quiet = new KeepAlive(out, keepAlive);
      KvEventListener listener =
          new KvEventListener() {
            @Override
            public void onBatch(
                String podId, String t, long seq, KvEventBatch batch, boolean replayed) {
              StringBuilder sb = new StringBuilder(256);
              sb.append("{\"seq\":").append(Long.toUnsignedString(seq)).append(",\"topic\":");
              quote(sb, t);
              sb.append(",\"pod\":");
              quote(sb, podId);
              if (replayed) {
                sb.append(",\"replayed\":true");
              }
              // The batch's own object ({"ts":…,"dp_rank":…,"events":[…]}) without its brace.
              String json = batch.toJson();
              sb.append(',').append(json, 1, json.length());
              synchronized (out) {
                out.println(sb);
                out.flush();
                quiet.printed(System.nanoTime());
              }
              if (count > 0 && printed.incrementAndGet() >= count) {
                done.countDown();
              }
            }

            @Override
            public void onGap(String podId, long expected, long received) {
              note(
                  "gap: "
                      + podId
                      + " missed seq "
                      + Long.toUnsignedString(expected)
                      + ".."
                      + Long.toUnsignedString(received - 1));
            }

            @Override
            public void onReplay(String podId, long from, long to, int n, boolean complete) {
              note(
                  "replay: "
                      + podId
                      + " seq "
                      + Long.toUnsignedString(from)
                      + ".."
                      + Long.toUnsignedString(to - 1)
                      + ": "
                      + n
                      + " batch(es), "
                      + (complete ? "complete" : "incomplete"));
            }

            @Override
            public void onRestart(String podId, long last, long received) {
              note(
                  "restart: "
                      + podId
                      + " seq went from "
                      + Long.toUnsignedString(last)
                      + " to "
                      + Long.toUnsignedString(received));
            }

            @Override
            public void onResync(String podId, String reason) {
              note("resync: " + podId + " (" + reason + ")");
            }

            @Override
            public void onDuplicate(String podId, long seq) {
              note("duplicate: " + podId + " seq " + Long.toUnsignedString(seq) + " dropped");
            }

            @Override
            public void onDropped(String podId, long seq, String reason, Exception cause) {
              note(
                  "dropped: "
                      + podId
                      + " seq "
                      + Long.toUnsignedString(seq)
                      + " "
                      + reason
                      + (cause == null ? "" : ": " + cause.getMessage()));
            }

            private void note(String s) {
              synchronized (err) {
                err.println(s);
                err.flush();
              }
            }
          };
      KvEventSubscriber sub;
      try {
        sub =
            KvEventSubscriber.builder()
                .sink(KvEventSink.NOOP)
                .listener(listener)
                .topic(topic)
                .shards(1)
                .dialect(sglang ? KvEventCodec.Dialect.SGLANG : KvEventCodec.Dialect.VLLM)
                .build()
                .start();
        sub.addPod(new PodEndpoint(pod, endpoint, replay, dpSize)).join();
      } catch (RuntimeException e) {
        err.println("cannot subscribe: " + e.getMessage());
        err.flush();
        return 2;
      }
      KvEventSubscriber toClose = sub;
      Thread hook =
          new Thread(
              () -> {
                done.countDown();
                toClose.close(); // the JVM does not wait for the main thread on SIGINT/SIGTERM
              },
              "kvroute-events-tail-shutdown");
      Runtime.getRuntime().addShutdownHook(hook);
      running = sub;
      try {
        while (!done.await(KeepAlive.TICK_MS, TimeUnit.MILLISECONDS)) {
          quiet.tick(System.nanoTime());
        }
      } finally {
        sub.close();
        running = null;
        try {
          Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException shuttingDown) {
          // the JVM is exiting because of SIGINT/SIGTERM; the hook has done its job
        }
      }
      return 0;
    }
  }

  /**
   * The empty lines {@code events tail} writes when the stream goes quiet after a batch, at {@link
   * #DELAYS_MS} of quiet. Lines of a burst can reach a reader in one read; a reader that waits on
   * {@code select()} and then takes one line from its buffer would keep the rest there until more
   * output arrives. The empty line is that output.
   *
   * <p>Thread-safe: called with the output's lock held ({@link #printed}) or from the main thread
   * ({@link #tick}, which takes the lock).
   */
  static final class KeepAlive {
    static final long TICK_MS = 50;
    static final long[] DELAYS_MS = {100, 300, 1_000, 3_000};

    private final PrintWriter out;
    private final boolean enabled;
    private long lastLine;
    private int next = DELAYS_MS.length; // the next delay to honour; none until a line is printed

    KeepAlive(PrintWriter out, boolean enabled) {
      this.out = out;
      this.enabled = enabled;
    }

    /** A batch line was printed at {@code now} (the caller holds the output's lock). */
    void printed(long now) {
      lastLine = now;
      next = 0;
    }

    /** Writes the empty line due at {@code now}, if any. */
    void tick(long now) {
      if (!enabled) {
        return;
      }
      synchronized (out) {
        if (next < DELAYS_MS.length
            && now - lastLine >= TimeUnit.MILLISECONDS.toNanos(DELAYS_MS[next])) {
          next++;
          out.println();
          out.flush();
        }
      }
    }
  }

  /** Appends {@code s} as a JSON string literal. */
  static void quote(StringBuilder sb, String s) {
    sb.append('"');
    com.fasterxml.jackson.core.io.JsonStringEncoder.getInstance().quoteAsString(s, sb);
    sb.append('"');
  }
}
