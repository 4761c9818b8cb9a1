package io.kvroute.service.internal;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ClosedSelectorException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A small HTTP/1.1 server on NIO selectors, built for one job: answering many small JSON requests
 * with as little CPU per request as possible. It replaces the JDK's {@code HttpServer}, whose
 * dispatcher hand-off, header maps and stream wrappers cost more than the score lookup itself.
 *
 * <p>What it does: keep-alive and pipelining, {@code Content-Length} and chunked request bodies,
 * {@code Expect: 100-continue}, {@code HEAD}, HTTP/1.0 clients, limits on the request head, the
 * body and the number of connections, a request timeout (slow clients) and an idle timeout, and a
 * lingering close after an error so the client reads the error instead of a reset. Requests that
 * smuggle ({@code Content-Length} with {@code Transfer-Encoding}, conflicting lengths) or fold
 * header lines are refused with 400. It does not do TLS, HTTP/2, or response streaming: responses
 * are whole byte arrays.
 *
 * <p><b>Threading.</b> Thread-safe. An acceptor thread hands new connections to {@code loops}
 * event-loop threads round-robin; each connection lives on one loop. {@link Handler#handle} runs on
 * the connection's loop and must not block: a handler that waits (for a remote tokenizer, say)
 * returns and calls {@link Exchange#respond} later from any thread. While a request is being
 * handled the connection reads nothing more, which bounds what one client can queue.
 */
public final class NioHttpServer implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(NioHttpServer.class);
  private static final int MAX_HEADERS = 100;
  private static final int INITIAL_BUFFER = 16 << 10;
  private static final int SHRINK_ABOVE = 128 << 10;
  private static final int MAX_DIRECT_OUT = 1 << 20;
  private static final long LINGER_NANOS = 2_000_000_000L;
  private static final long LINGER_MAX_BYTES = 4L << 20;
  private static final byte[] CONTINUE =
      "HTTP/1.1 100 Continue\r\n\r\n".getBytes(StandardCharsets.US_ASCII);
  private static final VarHandle RESPONDED;

  static {
    try {
      RESPONDED = MethodHandles.lookup().findVarHandle(Exchange.class, "responded", int.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  private static final DateTimeFormatter DATE =
      DateTimeFormatter.RFC_1123_DATE_TIME.withZone(ZoneOffset.UTC);

  /** Answers requests; see the class comment for the threading rules. */
  @FunctionalInterface
  public interface Handler {
    /**
     * Handles one request: calls {@link Exchange#respond} once, now or later. An exception thrown
     * before responding becomes a 500.
     */
    void handle(Exchange exchange) throws Exception;
  }

  /**
   * Server limits.
   *
   * @param host address to bind
   * @param port port to bind (0: any free port)
   * @param loops event-loop threads
   * @param maxConnections open connections allowed; more are answered 503 and closed
   * @param maxHeaderBytes request line plus headers
   * @param maxBodyBytes request body, after chunked decoding
   * @param requestTimeout time allowed to receive one request, and to write one response
   * @param idleTimeout how long a keep-alive connection may sit between requests
   * @param threadPrefix thread name prefix
   */
  public record Options(
      String host,
      int port,
      int loops,
      int maxConnections,
      int maxHeaderBytes,
      int maxBodyBytes,
      Duration requestTimeout,
      Duration idleTimeout,
      String threadPrefix) {}

  private final Options options;
  private final Handler handler;
  private final ServerSocketChannel server;
  private final Loop[] loops;
  private final Thread acceptor;
  private final AtomicInteger open = new AtomicInteger();
  private final AtomicBoolean closed = new AtomicBoolean();
  private final Counter rejectedConnections;
  private final Map<Integer, Counter> refused = new ConcurrentHashMap<>();
  private final MeterRegistry registry;
  private final long requestTimeoutNanos;
  private final long idleTimeoutNanos;
  private int nextLoop;

  /**
   * Binds the port; {@link #start()} begins serving.
   *
   * @throws UncheckedIOException if the port cannot be bound
   */
  public NioHttpServer(Options options, Handler handler, MeterRegistry registry) {
    this.options = options;
    this.handler = handler;
    this.registry = registry;
    this.requestTimeoutNanos = options.requestTimeout().toNanos();
    this.idleTimeoutNanos = options.idleTimeout().toNanos();
    try {
      this.server = ServerSocketChannel.open();
      server.setOption(StandardSocketOptions.SO_REUSEADDR, true);
      try {
        server.bind(new InetSocketAddress(options.host(), options.port()), 1024);
      } catch (java.net.BindException e) {
        throw new java.net.BindException(
            "cannot listen on " + options.host() + ":" + options.port() + ": " + e.getMessage());
      }
    } catch (IOException e) {
      throw new UncheckedIOException(
          "http: cannot bind " + options.host() + ":" + options.port() + ": " + e.getMessage(), e);
    }
    this.loops = new Loop[Math.max(1, options.loops())];
    try {
      for (int i = 0; i < loops.length; i++) {
        loops[i] = new Loop(options.threadPrefix() + (i + 1));
      }
    } catch (IOException e) {
      closeQuietly();
      throw new UncheckedIOException("http: cannot open a selector: " + e.getMessage(), e);
    }
    this.acceptor = new Thread(this::acceptLoop, options.threadPrefix() + "accept");
    acceptor.setDaemon(true);
    Gauge.builder("kvroute.service.http.connections", open, AtomicInteger::get)
        .description("open HTTP connections")
        .register(registry);
    this.rejectedConnections =
        Counter.builder("kvroute.service.http.connections.rejected")
            .description("connections refused because http.max_connections were open")
            .register(registry);
  }

  /** Starts the acceptor and the event loops. */
  public void start() {
    for (Loop l : loops) {
      l.thread.start();
    }
    acceptor.start();
  }

  /** The bound port. */
  public int port() {
    try {
      return ((InetSocketAddress) server.getLocalAddress()).getPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Open connections now. */
  public int connections() {
    return open.get();
  }

  /** Stops accepting, closes every connection and waits briefly for the loops to end. */
  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    closeQuietly();
    for (Loop l : loops) {
      if (l != null) {
        l.selector.wakeup();
      }
    }
    for (Loop l : loops) {
      if (l != null && l.thread.isAlive() && l.thread != Thread.currentThread()) {
        try {
          l.thread.join(2000);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return;
        }
      }
    }
  }

  private void closeQuietly() {
    try {
      server.close();
    } catch (IOException ignored) {
      // closing
    }
  }

  private void acceptLoop() {
    byte[] busy =
        response503("too many connections (http.max_connections = " + options.maxConnections());
    while (!closed.get()) {
      SocketChannel ch;
      try {
        ch = server.accept();
      } catch (ClosedChannelException e) {
        return;
      } catch (IOException e) {
        log.warn("accept failed: {}", e.toString());
        sleepBriefly();
        continue;
      }
      try {
        ch.configureBlocking(false);
        ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
        if (open.incrementAndGet() > options.maxConnections()) {
          open.decrementAndGet();
          rejectedConnections.increment();
          ch.write(ByteBuffer.wrap(busy));
          ch.close();
          continue;
        }
      } catch (IOException e) {
        closeChannel(ch);
        continue;
      }
      Loop l = loops[nextLoop++ % loops.length];
      l.execute(() -> l.register(ch));
    }
  }

  private static byte[] response503(String message) {
    byte[] body =
        ("{\"error\":\"" + message + ")\",\"status\":503}").getBytes(StandardCharsets.US_ASCII);
    String head =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: "
            + body.length
            + "\r\nConnection: close\r\n\r\n";
    byte[] h = head.getBytes(StandardCharsets.US_ASCII);
    byte[] out = Arrays.copyOf(h, h.length + body.length);
    System.arraycopy(body, 0, out, h.length, body.length);
    return out;
  }

  private static void sleepBriefly() {
    try {
      Thread.sleep(50);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static void closeChannel(SocketChannel ch) {
    try {
      ch.close();
    } catch (IOException ignored) {
      // closing
    }
  }

  private void countRefused(int status) {
    refused
        .computeIfAbsent(
            status,
            s ->
                Counter.builder("kvroute.service.http.refused")
                    .description("requests refused by the HTTP layer before any route ran")
                    .tag("status", Integer.toString(s))
                    .register(registry))
        .increment();
  }

  // ------------------------------------------------------------------ exchange

  /**
   * One request and its answer. The request's accessors are valid until {@link #respond} is called:
   * the body lives in the connection's buffer, which the next request reuses.
   */
  public static final class Exchange {
    private final Conn conn;
    private final String method;
    private final String path;
    private final byte[] body;
    private final int bodyOffset;
    private final int bodyLength;
    private volatile int responded;
    private boolean closeAfter;

    Exchange(Conn conn, String method, String path, byte[] body, int off, int len) {
      this.conn = conn;
      this.method = method;
      this.path = path;
      this.body = body;
      this.bodyOffset = off;
      this.bodyLength = len;
    }

    /** The request method, e.g. {@code GET}. */
    public String method() {
      return method;
    }

    /** The raw (still percent-encoded) path, without the query. */
    public String path() {
      return path;
    }

    /** The first value of a request header (case-insensitive name), or {@code null}. */
    public String header(String name) {
      return conn.header(name);
    }

    /** The array holding the request body. */
    public byte[] body() {
      return body;
    }

    /** Where the body starts in {@link #body()}. */
    public int bodyOffset() {
      return bodyOffset;
    }

    /** The body's length in bytes. */
    public int bodyLength() {
      return bodyLength;
    }

    /** Closes the connection once the answer is written. */
    public void closeAfterResponse() {
      closeAfter = true;
    }

    /** Answers with a whole body. */
    public void respond(int status, String contentType, byte[] body) {
      respond(status, contentType, body, 0, body.length);
    }

    /**
     * Answers the request; callable from any thread, once. On the connection's loop the bytes are
     * written before this returns; from another thread they are copied first.
     *
     * @throws IllegalStateException if the request was answered already
     */
    public void respond(int status, String contentType, byte[] body, int off, int len) {
      if (!RESPONDED.compareAndSet(this, 0, 1)) {
        throw new IllegalStateException("the request was answered already");
      }
      Loop loop = conn.loop;
      if (Thread.currentThread() == loop.thread) {
        conn.writeResponse(this, status, contentType, body, off, len);
      } else {
        byte[] copy = Arrays.copyOfRange(body, off, off + len);
        loop.execute(() -> conn.writeResponse(this, status, contentType, copy, 0, copy.length));
      }
    }

    boolean responded() {
      return responded != 0;
    }
  }

  // ------------------------------------------------------------------ event loop

  private final class Loop {
    final Selector selector;
    final Thread thread;
    final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
    final ArrayList<Conn> conns = new ArrayList<>();
    final java.util.function.Consumer<SelectionKey> onReady = this::ready;
    ByteBuffer out = ByteBuffer.allocateDirect(64 << 10);
    long dateSecond = -1;
    byte[] date;

    Loop(String name) throws IOException {
      this.selector = Selector.open();
      this.thread = new Thread(this::run, name);
      thread.setDaemon(true);
    }

    void execute(Runnable r) {
      tasks.add(r);
      selector.wakeup();
    }

    void register(SocketChannel ch) {
      if (closed.get()) {
        open.decrementAndGet();
        closeChannel(ch);
        return;
      }
      try {
        Conn c = new Conn(this, ch);
        c.key = ch.register(selector, SelectionKey.OP_READ, c);
        c.index = conns.size();
        conns.add(c);
      } catch (IOException e) {
        open.decrementAndGet();
        closeChannel(ch);
      }
    }

    void run() {
      long lastSweep = System.nanoTime();
      try {
        while (!closed.get()) {
          selector.select(onReady, 1000);
          runTasks();
          long now = System.nanoTime();
          if (now - lastSweep >= 500_000_000L) {
            lastSweep = now;
            sweep(now);
          }
        }
      } catch (IOException | ClosedSelectorException e) {
        if (!closed.get()) {
          log.error("http loop {} stopped", thread.getName(), e);
        }
      } finally {
        shutdown();
      }
    }

    private void runTasks() {
      Runnable r;
      while ((r = tasks.poll()) != null) {
        try {
          r.run();
        } catch (RuntimeException e) {
          log.warn("http loop task failed", e);
        }
      }
    }

    private void shutdown() {
      for (Conn c : new ArrayList<>(conns)) {
        c.close();
      }
      runTasks(); // registrations close their channels; answers find their connection closed
      try {
        selector.close();
      } catch (IOException ignored) {
        // closing
      }
    }

    private void ready(SelectionKey k) {
      Conn c = (Conn) k.attachment();
      try {
        if (k.isValid() && k.isWritable()) {
          c.onWritable();
        }
        if (k.isValid() && k.isReadable()) {
          c.onReadable();
        }
      } catch (RuntimeException e) {
        log.warn("http connection failed", e);
        c.close();
      }
    }

    private void sweep(long now) {
      for (int i = conns.size() - 1; i >= 0; i--) {
        if (i < conns.size()) {
          conns.get(i).check(now);
        }
      }
    }

    void remove(Conn c) {
      int i = c.index;
      Conn last = conns.remove(conns.size() - 1);
      if (last != c) {
        conns.set(i, last);
        last.index = i;
      }
    }

    byte[] date() {
      long sec = System.currentTimeMillis() / 1000;
      if (sec != dateSecond) {
        dateSecond = sec;
        date = DATE.format(Instant.ofEpochSecond(sec)).getBytes(StandardCharsets.US_ASCII);
      }
      return date;
    }
  }

  // ------------------------------------------------------------------ connection

  private static final int READ = 0;
  private static final int HANDLING = 1;
  private static final int WRITING = 2;
  private static final int LINGERING = 3;
  private static final int CLOSED = 4;

  private static final int CHUNK_SIZE = 0;
  private static final int CHUNK_DATA = 1;
  private static final int CHUNK_DATA_END = 2;
  private static final int CHUNK_TRAILER = 3;

  /** A refusal decided while reading a request (status, message, field). */
  private static final class Refusal extends Exception {
    final int status;
    final String field;

    Refusal(int status, String field, String message) {
      super(message, null, false, false);
      this.status = status;
      this.field = field;
    }
  }

  private final class Conn {
    final Loop loop;
    final SocketChannel ch;
    SelectionKey key;
    int index;
    int state = READ;
    byte[] in = new byte[INITIAL_BUFFER];
    ByteBuffer inBuf = ByteBuffer.wrap(in);
    int start; // first byte of the current request
    int end; // end of the bytes read
    int scan; // where the search for the head's end resumes
    long requestStarted; // nanos when the current request's first byte arrived; 0 = none
    long lastActivity = System.nanoTime();
    // the current request's head
    boolean headParsed;
    int bodyStart;
    long contentLength;
    boolean http10;
    boolean keepAlive;
    boolean expectContinue;
    boolean continueSent;
    boolean isHead;
    final int[] headers = new int[MAX_HEADERS * 4]; // name start/end, value start/end (from start)
    int headerCount;
    // chunked bodies
    boolean chunked;
    int chunkState;
    long chunkRemaining;
    int decodePos;
    int trailerBytes;
    byte[] chunkBody;
    int chunkLen;
    // the request in progress
    Exchange exchange;
    int requestEnd;
    boolean processing;
    // output
    ByteBuffer pending;
    boolean closeAfterWrite;
    long writeStarted;
    long lingerBytes;
    long lingerUntil;

    Conn(Loop loop, SocketChannel ch) {
      this.loop = loop;
      this.ch = ch;
    }

    void onReadable() {
      if (state == LINGERING) {
        linger();
        return;
      }
      if (state != READ) {
        return;
      }
      makeRoom();
      int n;
      try {
        inBuf.limit(in.length).position(end);
        n = ch.read(inBuf);
      } catch (IOException e) {
        close();
        return;
      }
      if (n < 0) {
        close();
        return;
      }
      if (n == 0) {
        return;
      }
      long now = System.nanoTime();
      lastActivity = now;
      if (start == end) {
        requestStarted = now;
      }
      end += n;
      process();
    }

    /** Makes room in the buffer for the next read. */
    private void makeRoom() {
      // Bytes needed from start; always more than end - start (see process()).
      int need;
      if (!headParsed) {
        need = Math.min(end - start, options.maxHeaderBytes()) + 4096;
      } else if (chunked) {
        need = end - start + 8192;
      } else {
        need = (int) (bodyStart - start + contentLength);
      }
      if (start + need <= in.length && end < in.length) {
        return;
      }
      if (need <= in.length) {
        compact();
        return;
      }
      byte[] grown = new byte[Math.max(need, Math.min(in.length * 2, maxBuffer()))];
      System.arraycopy(in, start, grown, 0, end - start);
      shift(start);
      in = grown;
      inBuf = ByteBuffer.wrap(in);
    }

    private int maxBuffer() {
      return options.maxHeaderBytes() + options.maxBodyBytes() + 16384;
    }

    private void compact() {
      if (start == 0) {
        return;
      }
      System.arraycopy(in, start, in, 0, end - start);
      shift(start);
    }

    private void shift(int by) {
      end -= by;
      scan = Math.max(0, scan - by);
      if (headParsed) {
        bodyStart -= by;
        decodePos -= by;
      }
      start -= by;
    }

    /** Parses and dispatches as many whole requests as the buffer holds. */
    void process() {
      if (processing) {
        return;
      }
      processing = true;
      try {
        while (state == READ && end > start) {
          try {
            if (!headParsed && !parseHead()) {
              return;
            }
            if (!bodyComplete()) {
              if (expectContinue && !continueSent) {
                continueSent = true;
                writeRaw(CONTINUE);
              }
              return;
            }
          } catch (Refusal r) {
            refuse(r);
            return;
          }
          dispatch();
        }
      } finally {
        processing = false;
      }
    }

    /** Finds and parses the head; false if it is not complete yet. */
    private boolean parseHead() throws Refusal {
      // Tolerate empty lines before a request line (RFC 9112, section 2.2).
      while (start < end && (in[start] == '\r' || in[start] == '\n')) {
        start++;
      }
      if (start == end) {
        start = end = scan = 0;
        requestStarted = 0;
        return false;
      }
      int headEnd = -1;
      int limit = Math.min(end, start + options.maxHeaderBytes());
      for (int i = Math.max(scan, start + 2); i < limit; i++) {
        if (in[i] == '\n' && (in[i - 1] == '\n' || (in[i - 1] == '\r' && in[i - 2] == '\n'))) {
          headEnd = i + 1;
          break;
        }
      }
      if (headEnd < 0) {
        if (end - start >= options.maxHeaderBytes()) {
          throw new Refusal(
              431,
              "headers",
              "request line and headers exceed " + options.maxHeaderBytes() + " bytes");
        }
        scan = end;
        return false;
      }
      parseRequest(headEnd);
      headParsed = true;
      bodyStart = headEnd;
      decodePos = headEnd;
      return true;
    }

    private String method;
    private String path;

    private void parseRequest(int headEnd) throws Refusal {
      byte[] b = in;
      int lineEnd = indexOf(b, start, headEnd, (byte) '\n');
      int le = lineEnd > start && b[lineEnd - 1] == '\r' ? lineEnd - 1 : lineEnd;
      int sp1 = indexOf(b, start, le, (byte) ' ');
      if (sp1 <= start) {
        throw new Refusal(400, null, "malformed request line");
      }
      int sp2 = indexOf(b, sp1 + 1, le, (byte) ' ');
      if (sp2 < 0 || sp2 == sp1 + 1 || indexOf(b, sp2 + 1, le, (byte) ' ') >= 0) {
        throw new Refusal(400, null, "malformed request line");
      }
      for (int i = start; i < sp1; i++) {
        if (!isTokenChar(b[i])) {
          throw new Refusal(400, null, "malformed request method");
        }
      }
      method = methodString(b, start, sp1);
      isHead = method.equals("HEAD");
      if (le - sp2 - 1 == 8 && startsWith(b, sp2 + 1, "HTTP/1.")) {
        byte minor = b[sp2 + 8];
        if (minor == '1') {
          http10 = false;
        } else if (minor == '0') {
          http10 = true;
        } else {
          throw new Refusal(505, null, "HTTP version not supported; use HTTP/1.1");
        }
      } else if (startsWith(b, sp2 + 1, "HTTP/")) {
        throw new Refusal(505, null, "HTTP version not supported; use HTTP/1.1");
      } else {
        throw new Refusal(400, null, "malformed request line");
      }
      int ts = sp1 + 1;
      for (int i = ts; i < sp2; i++) {
        if (b[i] <= ' ' || b[i] == 0x7f) {
          throw new Refusal(400, null, "malformed request target");
        }
      }
      if (b[ts] != '/') {
        int scheme =
            startsWith(b, ts, "http://") ? ts + 7 : startsWith(b, ts, "https://") ? ts + 8 : -1;
        if (scheme < 0) {
          throw new Refusal(400, null, "malformed request target; send an absolute path");
        }
        int slash = indexOf(b, scheme, sp2, (byte) '/');
        ts = slash < 0 ? -1 : slash;
      }
      if (ts < 0) {
        path = "/";
      } else {
        int q = indexOf(b, ts, sp2, (byte) '?');
        int pe = q < 0 ? sp2 : q;
        path = pathString(b, ts, pe);
      }
      // headers
      headerCount = 0;
      contentLength = 0;
      boolean haveLength = false;
      chunked = false;
      expectContinue = false;
      continueSent = false;
      keepAlive = !http10;
      boolean haveEncoding = false;
      int i = lineEnd + 1;
      while (i < headEnd) {
        int nl = indexOf(b, i, headEnd, (byte) '\n');
        int e = nl > i && b[nl - 1] == '\r' ? nl - 1 : nl;
        if (e == i) {
          break; // the empty line
        }
        if (b[i] == ' ' || b[i] == '\t') {
          throw new Refusal(400, "headers", "folded header lines are not accepted");
        }
        int colon = indexOf(b, i, e, (byte) ':');
        if (colon <= i) {
          throw new Refusal(400, "headers", "malformed header line");
        }
        for (int k = i; k < colon; k++) {
          if (!isTokenChar(b[k])) {
            throw new Refusal(400, "headers", "malformed header name");
          }
        }
        int vs = colon + 1;
        while (vs < e && (b[vs] == ' ' || b[vs] == '\t')) {
          vs++;
        }
        int ve = e;
        while (ve > vs && (b[ve - 1] == ' ' || b[ve - 1] == '\t')) {
          ve--;
        }
        for (int k = vs; k < ve; k++) {
          if ((b[k] < ' ' && b[k] != '\t') || b[k] == 0x7f) {
            throw new Refusal(400, "headers", "control character in a header value");
          }
        }
        if (headerCount == MAX_HEADERS) {
          throw new Refusal(431, "headers", "more than " + MAX_HEADERS + " request headers");
        }
        int h = headerCount++ * 4;
        headers[h] = i - start;
        headers[h + 1] = colon - start;
        headers[h + 2] = vs - start;
        headers[h + 3] = ve - start;
        int nameLen = colon - i;
        if (nameLen == 14 && equalsIgnoreCase(b, i, "content-length")) {
          long v = parseLength(b, vs, ve);
          if (haveLength && v != contentLength) {
            throw new Refusal(400, "Content-Length", "conflicting Content-Length headers");
          }
          haveLength = true;
          contentLength = v;
        } else if (nameLen == 17 && equalsIgnoreCase(b, i, "transfer-encoding")) {
          if (haveEncoding || ve - vs != 7 || !equalsIgnoreCase(b, vs, "chunked")) {
            throw new Refusal(
                501, "Transfer-Encoding", "only Transfer-Encoding: chunked is supported");
          }
          haveEncoding = true;
          chunked = true;
        } else if (nameLen == 10 && equalsIgnoreCase(b, i, "connection")) {
          if (containsToken(b, vs, ve, "close")) {
            keepAlive = false;
          } else if (http10 && containsToken(b, vs, ve, "keep-alive")) {
            keepAlive = true;
          }
        } else if (nameLen == 6 && equalsIgnoreCase(b, i, "expect")) {
          if (ve - vs == 12 && equalsIgnoreCase(b, vs, "100-continue")) {
            expectContinue = !http10;
          } else {
            throw new Refusal(417, "Expect", "only Expect: 100-continue is supported");
          }
        }
        i = nl + 1;
      }
      if (chunked && (haveLength || http10)) {
        throw new Refusal(
            400,
            "Transfer-Encoding",
            http10
                ? "Transfer-Encoding is not allowed in HTTP/1.0"
                : "both Content-Length and Transfer-Encoding were sent");
      }
      if (contentLength > options.maxBodyBytes()) {
        throw new Refusal(
            413,
            "body",
            "request body of "
                + contentLength
                + " bytes exceeds "
                + options.maxBodyBytes()
                + " bytes");
      }
      if (chunked) {
        chunkState = CHUNK_SIZE;
        chunkLen = 0;
        trailerBytes = 0;
        if (chunkBody == null) {
          chunkBody = new byte[4096];
        }
      }
    }

    private long parseLength(byte[] b, int s, int e) throws Refusal {
      if (e == s || e - s > 18) {
        throw new Refusal(400, "Content-Length", "invalid Content-Length");
      }
      long v = 0;
      for (int k = s; k < e; k++) {
        int d = b[k] - '0';
        if (d < 0 || d > 9) {
          throw new Refusal(400, "Content-Length", "invalid Content-Length");
        }
        v = v * 10 + d;
      }
      return v;
    }

    /** Whether the whole body is in; decodes chunks as they arrive. */
    private boolean bodyComplete() throws Refusal {
      if (!chunked) {
        if (end - bodyStart >= contentLength) {
          requestEnd = (int) (bodyStart + contentLength);
          return true;
        }
        return false;
      }
      byte[] b = in;
      int p = decodePos;
      while (p < end) {
        switch (chunkState) {
          case CHUNK_SIZE:
            {
              int nl = indexOf(b, p, end, (byte) '\n');
              if (nl < 0) {
                if (end - p > 1024) {
                  throw new Refusal(400, "body", "malformed chunk size line");
                }
                return keep(p);
              }
              long size = 0;
              int k = p;
              int digits = 0;
              while (k < nl) {
                int d = Character.digit(b[k], 16);
                if (d < 0) {
                  break;
                }
                if (++digits > 8) {
                  throw new Refusal(400, "body", "chunk size too large");
                }
                size = size << 4 | d;
                k++;
              }
              if (digits == 0 || (k < nl && b[k] != ';' && b[k] != '\r' && b[k] != ' ')) {
                throw new Refusal(400, "body", "malformed chunk size line");
              }
              if (chunkLen + size > options.maxBodyBytes()) {
                throw bodyTooLarge();
              }
              p = nl + 1;
              if (size == 0) {
                chunkState = CHUNK_TRAILER;
              } else {
                chunkRemaining = size;
                chunkState = CHUNK_DATA;
              }
              break;
            }
          case CHUNK_DATA:
            {
              int n = (int) Math.min(chunkRemaining, end - p);
              if (chunkBody.length < chunkLen + n) {
                chunkBody =
                    Arrays.copyOf(
                        chunkBody,
                        Math.min(
                            options.maxBodyBytes(), Math.max(chunkLen + n, chunkBody.length * 2)));
              }
              System.arraycopy(b, p, chunkBody, chunkLen, n);
              chunkLen += n;
              p += n;
              chunkRemaining -= n;
              if (chunkRemaining == 0) {
                chunkState = CHUNK_DATA_END;
              }
              break;
            }
          case CHUNK_DATA_END:
            if (b[p] == '\n') {
              p++;
            } else if (b[p] == '\r') {
              if (p + 1 == end) {
                return keep(p);
              }
              if (b[p + 1] != '\n') {
                throw new Refusal(400, "body", "malformed chunk: no line end after the data");
              }
              p += 2;
            } else {
              throw new Refusal(400, "body", "malformed chunk: no line end after the data");
            }
            chunkState = CHUNK_SIZE;
            break;
          default: // CHUNK_TRAILER
            {
              int nl = indexOf(b, p, end, (byte) '\n');
              if (nl < 0) {
                if (trailerBytes + end - p > options.maxHeaderBytes()) {
                  throw new Refusal(431, "headers", "chunked trailers too large");
                }
                return keep(p);
              }
              boolean empty = nl == p || (nl == p + 1 && b[p] == '\r');
              trailerBytes += nl + 1 - p;
              if (trailerBytes > options.maxHeaderBytes()) {
                throw new Refusal(431, "headers", "chunked trailers too large");
              }
              p = nl + 1;
              if (empty) {
                decodePos = p;
                requestEnd = p;
                return true;
              }
            }
        }
      }
      return keep(p);
    }

    /** Drops decoded chunk bytes from the buffer (the head stays); returns false. */
    private boolean keep(int p) {
      int rest = end - p;
      if (p > bodyStart) {
        System.arraycopy(in, p, in, bodyStart, rest);
        end = bodyStart + rest;
      }
      decodePos = bodyStart;
      return false;
    }

    private Refusal bodyTooLarge() {
      return new Refusal(413, "body", "request body exceeds " + options.maxBodyBytes() + " bytes");
    }

    private void dispatch() {
      state = HANDLING;
      Exchange ex =
          chunked
              ? new Exchange(this, method, path, chunkBody, 0, chunkLen)
              : new Exchange(this, method, path, in, bodyStart, (int) contentLength);
      exchange = ex;
      try {
        handler.handle(ex);
      } catch (Throwable e) {
        if (e instanceof VirtualMachineError && !(e instanceof StackOverflowError)) {
          close();
          throw (VirtualMachineError) e;
        }
        log.warn("http handler failed on {} {}", method, path, e);
        if (!ex.responded()) {
          ex.respond(
              500,
              "application/json",
              errorBody(500, null, "internal error: " + e.getClass().getSimpleName()));
        }
      }
      if (state == HANDLING && exchange == ex && !ex.responded()) {
        key.interestOps(0); // asynchronous: read nothing more until it is answered
      }
    }

    String header(String name) {
      Exchange ex = exchange;
      if (ex == null || ex.responded()) {
        return null;
      }
      int n = name.length();
      for (int h = 0; h < headerCount * 4; h += 4) {
        int s = start + headers[h];
        if (headers[h + 1] - headers[h] == n && equalsIgnoreCase(in, s, name)) {
          int vs = start + headers[h + 2];
          return new String(in, vs, headers[h + 3] - headers[h + 2], StandardCharsets.ISO_8859_1);
        }
      }
      return null;
    }

    /** Writes an answer; runs on the loop. */
    void writeResponse(Exchange ex, int status, String type, byte[] body, int off, int len) {
      if (state == CLOSED || exchange != ex) {
        return;
      }
      boolean close = ex.closeAfter || !keepAlive || closed.get();
      writeHead(status, type, len, close);
      ByteBuffer o = loop.out;
      int bodyLen = isHead ? 0 : len;
      if (o.remaining() < bodyLen) {
        int need = o.position() + bodyLen;
        ByteBuffer bigger =
            need <= MAX_DIRECT_OUT ? ByteBuffer.allocateDirect(need) : ByteBuffer.allocate(need);
        o.flip();
        bigger.put(o);
        if (need <= MAX_DIRECT_OUT) {
          loop.out = bigger;
        }
        o = bigger;
      }
      o.put(body, off, bodyLen);
      o.flip();
      exchange = null;
      finishRequest();
      send(o, close);
    }

    private void writeHead(int status, String type, int len, boolean close) {
      ByteBuffer o = loop.out;
      o.clear();
      ascii(o, "HTTP/1.1 ");
      digits(o, status);
      o.put((byte) ' ');
      ascii(o, reason(status));
      ascii(o, "\r\nContent-Type: ");
      ascii(o, type);
      ascii(o, "\r\nContent-Length: ");
      digits(o, len);
      ascii(o, "\r\nCache-Control: no-store\r\nDate: ");
      o.put(loop.date());
      ascii(
          o,
          close
              ? "\r\nConnection: close\r\n\r\n"
              : http10 ? "\r\nConnection: keep-alive\r\n\r\n" : "\r\n\r\n");
    }

    /** The current request is answered: its bytes can go. */
    private void finishRequest() {
      headParsed = false;
      start = requestEnd;
      scan = start;
      if (chunked && chunkBody != null && chunkBody.length > SHRINK_ABOVE) {
        chunkBody = null;
      }
      chunked = false;
      if (start >= end) {
        start = end = scan = 0;
        requestStarted = 0;
        if (in.length > SHRINK_ABOVE) {
          in = new byte[INITIAL_BUFFER];
          inBuf = ByteBuffer.wrap(in);
        }
      } else {
        requestStarted = System.nanoTime();
      }
    }

    private void send(ByteBuffer o, boolean close) {
      try {
        ch.write(o);
      } catch (IOException e) {
        close();
        return;
      }
      if (o.hasRemaining()) {
        pending = ByteBuffer.allocate(o.remaining());
        pending.put(o).flip();
        closeAfterWrite = close;
        writeStarted = System.nanoTime();
        state = WRITING;
        key.interestOps(SelectionKey.OP_WRITE);
        return;
      }
      afterWrite(close);
    }

    private void afterWrite(boolean close) {
      if (close) {
        startLinger();
        return;
      }
      boolean wasReading = state == READ;
      state = READ;
      if (key.interestOps() != SelectionKey.OP_READ) {
        key.interestOps(SelectionKey.OP_READ);
      }
      if (!wasReading && end > start) {
        process();
      }
    }

    void onWritable() {
      if (state != WRITING) {
        return;
      }
      try {
        ch.write(pending);
      } catch (IOException e) {
        close();
        return;
      }
      if (pending.hasRemaining()) {
        writeStarted = System.nanoTime();
        return;
      }
      pending = null;
      afterWrite(closeAfterWrite);
    }

    /** Writes a small interim response; closes the connection if it does not fit the socket. */
    private void writeRaw(byte[] bytes) {
      try {
        ByteBuffer b = ByteBuffer.wrap(bytes);
        ch.write(b);
        if (b.hasRemaining()) {
          close();
        }
      } catch (IOException e) {
        close();
      }
    }

    private void refuse(Refusal r) {
      countRefused(r.status);
      byte[] body = errorBody(r.status, r.field, r.getMessage());
      headParsed = false;
      exchange = null;
      writeHead(r.status, "application/json", body.length, true);
      ByteBuffer o = loop.out;
      if (o.remaining() >= body.length) {
        o.put(body).flip();
      } else {
        o.flip();
        ByteBuffer b = ByteBuffer.allocate(o.remaining() + body.length);
        b.put(o).put(body).flip();
        o = b;
      }
      state = WRITING;
      send(o, true);
    }

    /**
     * Half-closes and reads (discarding) for a while before closing, so a client still sending its
     * body reads the error rather than a connection reset.
     */
    private void startLinger() {
      try {
        ch.shutdownOutput();
      } catch (IOException e) {
        close();
        return;
      }
      state = LINGERING;
      lingerUntil = System.nanoTime() + LINGER_NANOS;
      lingerBytes = 0;
      key.interestOps(SelectionKey.OP_READ);
      linger();
    }

    private void linger() {
      try {
        while (true) {
          inBuf.clear();
          int n = ch.read(inBuf);
          if (n < 0 || (lingerBytes += Math.max(0, n)) > LINGER_MAX_BYTES) {
            close();
            return;
          }
          if (n == 0) {
            return;
          }
        }
      } catch (IOException e) {
        close();
      }
    }

    /** Timeouts, from the loop's sweep. */
    void check(long now) {
      switch (state) {
        case READ:
          if (requestStarted != 0 && end > start) {
            if (now - requestStarted > requestTimeoutNanos) {
              refuse(
                  new Refusal(
                      408,
                      null,
                      "request not received within "
                          + options.requestTimeout().toMillis()
                          + " ms"));
            }
          } else if (now - lastActivity > idleTimeoutNanos) {
            close();
          }
          break;
        case WRITING:
          if (now - writeStarted > requestTimeoutNanos) {
            close(); // the client stopped reading
          }
          break;
        case LINGERING:
          if (now - lingerUntil > 0) {
            close();
          }
          break;
        default:
          break;
      }
    }

    void close() {
      if (state == CLOSED) {
        return;
      }
      state = CLOSED;
      exchange = null;
      if (key != null) {
        key.cancel();
      }
      closeChannel(ch);
      open.decrementAndGet();
      loop.remove(this);
    }
  }

  // ------------------------------------------------------------------ bytes

  static byte[] errorBody(int status, String field, String message) {
    ScoreCodec.Bytes b = new ScoreCodec.Bytes(128 + message.length());
    b.ascii("{\"error\":").jsonString(message);
    if (field != null) {
      b.ascii(",\"field\":").jsonString(field);
    }
    b.ascii(",\"status\":").number(status).ascii("}");
    return Arrays.copyOf(b.buf, b.size);
  }

  private static void ascii(ByteBuffer o, String s) {
    for (int i = 0, n = s.length(); i < n; i++) {
      o.put((byte) s.charAt(i));
    }
  }

  private static void digits(ByteBuffer o, int v) {
    if (v >= 10) {
      digits(o, v / 10);
    }
    o.put((byte) ('0' + v % 10));
  }

  private static int indexOf(byte[] b, int from, int to, byte c) {
    for (int i = from; i < to; i++) {
      if (b[i] == c) {
        return i;
      }
    }
    return -1;
  }

  private static boolean startsWith(byte[] b, int at, String s) {
    if (at + s.length() > b.length) {
      return false;
    }
    for (int i = 0; i < s.length(); i++) {
      if (b[at + i] != s.charAt(i)) {
        return false;
      }
    }
    return true;
  }

  private static boolean equalsIgnoreCase(byte[] b, int at, String lower) {
    for (int i = 0; i < lower.length(); i++) {
      int c = b[at + i];
      if (c >= 'A' && c <= 'Z') {
        c += 32;
      }
      int d = lower.charAt(i);
      if (d >= 'A' && d <= 'Z') {
        d += 32;
      }
      if (c != d) {
        return false;
      }
    }
    return true;
  }

  private static boolean containsToken(byte[] b, int s, int e, String token) {
    String v = new String(b, s, e - s, StandardCharsets.ISO_8859_1).toLowerCase(Locale.ROOT);
    for (String part : v.split(",")) {
      if (part.trim().equals(token)) {
        return true;
      }
    }
    return false;
  }

  private static boolean isTokenChar(byte c) {
    if (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
      return true;
    }
    return c > 0 && "!#$%&'*+-.^_`|~".indexOf(c) >= 0;
  }

  private static final String[] METHODS = {"GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS"};

  private static String methodString(byte[] b, int s, int e) {
    for (String m : METHODS) {
      if (m.length() == e - s && startsWith(b, s, m)) {
        return m;
      }
    }
    return new String(b, s, e - s, StandardCharsets.US_ASCII);
  }

  private static final String[] PATHS = {"/api/v1/score", "/healthz", "/metrics"};

  private static String pathString(byte[] b, int s, int e) {
    for (String p : PATHS) {
      if (p.length() == e - s && startsWith(b, s, p)) {
        return p;
      }
    }
    return new String(b, s, e - s, StandardCharsets.ISO_8859_1);
  }

  static String reason(int status) {
    switch (status) {
      case 200:
        return "OK";
      case 400:
        return "Bad Request";
      case 404:
        return "Not Found";
      case 405:
        return "Method Not Allowed";
      case 408:
        return "Request Timeout";
      case 413:
        return "Content Too Large";
      case 417:
        return "Expectation Failed";
      case 431:
        return "Request Header Fields Too Large";
      case 500:
        return "Internal Server Error";
      case 501:
        return "Not Implemented";
      case 502:
        return "Bad Gateway";
      case 503:
        return "Service Unavailable";
      case 504:
        return "Gateway Timeout";
      case 505:
        return "HTTP Version Not Supported";
      default:
        return "Status";
    }
  }
}
