package io.kvroute.edge.internal;

import io.kvroute.connector.HttpTransport.Outbound;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.UpstreamException;
import io.netty.bootstrap.Bootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoEventLoop;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.codec.http.HttpClientCodec;
import io.netty.handler.codec.http.HttpDecoderConfig;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslHandler;
import io.netty.handler.ssl.SslProvider;
import io.netty.handler.ssl.util.InsecureTrustManagerFactory;
import io.netty.util.concurrent.DefaultThreadFactory;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.internal.ThreadExecutorMap;
import java.net.URI;
import java.security.KeyStore;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.TrustManagerFactory;

/**
 * The engine of {@code EdgeClient}: per-event-loop connection pools, connecting, and the choice of
 * loop for each call (the caller's own Netty loop when it is on one, else this client's).
 *
 * <p>Thread-safe. Each {@link LoopPool} is touched only on its loop.
 */
public final class NettyClient {
  private static final int MAX_TARGETS = 4096;

  /**
   * The settings of {@code EdgeClient.Builder}.
   *
   * @param connectTimeout TCP and TLS connect timeout
   * @param maxIdlePerUpstream idle connections kept per loop and upstream
   * @param keepAlive how long an idle connection is kept
   * @param maxResponseHeaderBytes the largest response head
   * @param ioThreads threads of the client's own loops
   * @param transport {@code auto}, {@code nio} or {@code epoll}
   * @param trustStore trusted certificates for https, or {@code null} for the JDK's
   * @param insecure skip certificate verification (tests only)
   */
  public record Settings(
      Duration connectTimeout,
      int maxIdlePerUpstream,
      Duration keepAlive,
      int maxResponseHeaderBytes,
      int ioThreads,
      String transport,
      KeyStore trustStore,
      boolean insecure) {}

  final Settings settings;
  private final Map<EventLoop, LoopPool> pools = new ConcurrentHashMap<>();
  private final Map<String, Target> targets = new ConcurrentHashMap<>();
  private final AtomicInteger open = new AtomicInteger();
  private final Object lock = new Object();
  private volatile EventLoopGroup own;
  private volatile boolean ownEpoll;
  private volatile SslContext tls;
  private volatile boolean closed;

  /**
   * A client; its own loops start on first use.
   *
   * @param settings the settings
   */
  public NettyClient(Settings settings) {
    this.settings = settings;
    if (settings.transport().equals("epoll") && !Epoll.isAvailable()) {
      throw new IllegalArgumentException(
          "transport epoll is not available here (" + Epoll.unavailabilityCause() + ")");
    }
  }

  /** Where a request goes: scheme, host, port and any path prefix of the endpoint's base URL. */
  record Target(boolean https, String host, int port, String hostHeader, String basePath) {}

  /**
   * Sends {@code out}.
   *
   * @param out the request
   * @return its response head, on the connection's loop
   */
  public CompletableFuture<StreamingResponse> send(Outbound out) {
    CompletableFuture<StreamingResponse> future = new CompletableFuture<>();
    Target target;
    try {
      target = target(out);
    } catch (IllegalArgumentException e) {
      future.completeExceptionally(
          UpstreamException.transport(
              out, UpstreamException.Kind.IO, "failed: " + e.getMessage(), e));
      return future;
    }
    if (closed) {
      future.completeExceptionally(
          UpstreamException.transport(
              out, UpstreamException.Kind.IO, "failed: the client is closed", null));
      return future;
    }
    EventLoop loop = loopFor();
    UpstreamCall call = new UpstreamCall(this, out, target, loop, pool(loop), future);
    if (loop.inEventLoop()) {
      call.start();
    } else {
      loop.execute(call::start);
    }
    return future;
  }

  private Target target(Outbound out) {
    String base = out.endpoint().baseUrl();
    Target t = targets.get(base);
    if (t == null) {
      URI u = URI.create(base);
      String scheme = u.getScheme() == null ? "" : u.getScheme().toLowerCase(Locale.ROOT);
      if (!scheme.equals("http") && !scheme.equals("https")) {
        throw new IllegalArgumentException("not an http(s) URL: " + base);
      }
      if (u.getHost() == null) {
        throw new IllegalArgumentException("no host in " + base);
      }
      boolean https = scheme.equals("https");
      int port = u.getPort() > 0 ? u.getPort() : https ? 443 : 80;
      String host = u.getHost();
      String hostHeader =
          (host.indexOf(':') >= 0 && !host.startsWith("[") ? "[" + host + "]" : host)
              + (u.getPort() > 0 ? ":" + u.getPort() : "");
      String path = u.getRawPath() == null ? "" : u.getRawPath();
      if (path.endsWith("/")) {
        path = path.substring(0, path.length() - 1);
      }
      if (host.startsWith("[") && host.endsWith("]")) {
        host = host.substring(1, host.length() - 1);
      }
      t = new Target(https, host, port, hostHeader, path);
      if (targets.size() < MAX_TARGETS) {
        targets.put(base, t);
      }
    }
    return t;
  }

  /** The caller's event loop if it is on a Netty loop this client can use, else one of its own. */
  private EventLoop loopFor() {
    EventExecutor current = ThreadExecutorMap.currentExecutor();
    if (current instanceof IoEventLoop l
        && !l.isShuttingDown()
        && (l.isIoType(NioIoHandler.class) || l.isIoType(EpollIoHandler.class))) {
      return l;
    }
    return own().next();
  }

  private EventLoopGroup own() {
    EventLoopGroup g = own;
    if (g == null) {
      synchronized (lock) {
        g = own;
        if (g == null) {
          boolean epoll = !settings.transport().equals("nio") && Epoll.isAvailable();
          ownEpoll = epoll;
          g =
              new MultiThreadIoEventLoopGroup(
                  settings.ioThreads(),
                  new DefaultThreadFactory("kvroute-upstream", true),
                  epoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory());
          own = g;
        }
      }
    }
    return g;
  }

  private LoopPool pool(EventLoop loop) {
    LoopPool p = pools.get(loop);
    if (p == null) {
      p = pools.computeIfAbsent(loop, l -> new LoopPool(l));
      if (p.fresh) {
        p.fresh = false;
        LoopPool created = p;
        loop.terminationFuture().addListener(f -> pools.remove(loop, created));
      }
    }
    return p;
  }

  SslContext tls() {
    SslContext c = tls;
    if (c == null) {
      synchronized (lock) {
        c = tls;
        if (c == null) {
          try {
            SslContextBuilder b =
                SslContextBuilder.forClient()
                    .sslProvider(SslProvider.JDK)
                    .protocols("TLSv1.3", "TLSv1.2");
            if (settings.insecure()) {
              b.trustManager(InsecureTrustManagerFactory.INSTANCE);
            } else if (settings.trustStore() != null) {
              TrustManagerFactory tmf =
                  TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
              tmf.init(settings.trustStore());
              b.trustManager(tmf);
            }
            c = b.build();
            tls = c;
          } catch (Exception e) {
            throw new IllegalStateException("cannot set up TLS: " + e.getMessage(), e);
          }
        }
      }
    }
    return c;
  }

  /** A new connection to {@code target} on {@code loop}, with the HTTP codec installed. */
  io.netty.channel.ChannelFuture connect(EventLoop loop, Target target, UpstreamCall.Handler h) {
    boolean epoll = loop instanceof IoEventLoop l && l.isIoType(EpollIoHandler.class);
    Bootstrap b =
        new Bootstrap()
            .group(loop)
            .channel(epoll ? EpollSocketChannel.class : NioSocketChannel.class)
            .option(ChannelOption.TCP_NODELAY, true)
            .option(ChannelOption.SO_KEEPALIVE, true)
            .option(ChannelOption.AUTO_READ, false)
            .option(
                ChannelOption.CONNECT_TIMEOUT_MILLIS,
                (int) Math.min(Integer.MAX_VALUE, settings.connectTimeout().toMillis()))
            .handler(
                new ChannelInitializer<SocketChannel>() {
                  @Override
                  protected void initChannel(SocketChannel ch) {
                    if (target.https()) {
                      SslHandler ssl = tls().newHandler(ch.alloc(), target.host(), target.port());
                      if (!settings.insecure()) {
                        SSLEngine engine = ssl.engine();
                        SSLParameters p = engine.getSSLParameters();
                        p.setEndpointIdentificationAlgorithm("HTTPS");
                        engine.setSSLParameters(p);
                      }
                      ssl.setHandshakeTimeout(
                          settings.connectTimeout().toMillis(), TimeUnit.MILLISECONDS);
                      ch.pipeline().addLast("tls", ssl);
                    }
                    ch.pipeline()
                        .addLast(
                            "codec",
                            new HttpClientCodec(
                                new HttpDecoderConfig()
                                    .setMaxHeaderSize(settings.maxResponseHeaderBytes())
                                    .setMaxChunkSize(16 << 10),
                                false,
                                false))
                        .addLast("call", h);
                  }
                });
    return b.connect(target.host(), target.port());
  }

  void opened() {
    open.incrementAndGet();
  }

  void released() {
    open.decrementAndGet();
  }

  /**
   * Responses still open.
   *
   * @return the count
   */
  public int openResponses() {
    return open.get();
  }

  /**
   * Idle pooled connections over all loops (read without the loops' consent: approximate).
   *
   * @return the count
   */
  public int idleConnections() {
    int n = 0;
    for (LoopPool p : pools.values()) {
      n += p.size;
    }
    return n;
  }

  boolean closed() {
    return closed;
  }

  /** Closes pooled connections and this client's own loops. */
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    for (LoopPool p : pools.values()) {
      if (!p.loop.isShuttingDown()) {
        p.loop.execute(p::closeAll);
      }
    }
    EventLoopGroup g = own;
    if (g != null) {
      g.shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly(5, TimeUnit.SECONDS);
    }
  }

  /**
   * The idle connections of one event loop, per upstream. Touched only on its loop (except {@code
   * size}, read for a gauge).
   */
  final class LoopPool {
    final EventLoop loop;
    private final HashMap<Target, ArrayDeque<Channel>> idle = new HashMap<>();
    volatile int size;
    boolean fresh = true;
    private boolean sweeping;

    LoopPool(EventLoop loop) {
      this.loop = loop;
    }

    /** An idle, open connection to {@code t}, or {@code null}. */
    Channel poll(Target t) {
      ArrayDeque<Channel> q = idle.get(t);
      if (q == null) {
        return null;
      }
      Channel c;
      while ((c = q.pollLast()) != null) {
        size--;
        if (c.isActive()) {
          return c;
        }
        c.close();
      }
      return null;
    }

    /** Keeps {@code c} for the next call to {@code t}, or closes it when the pool is full. */
    void offer(Target t, Channel c, UpstreamCall.Handler h) {
      if (closed || settings.maxIdlePerUpstream() == 0 || !c.isActive()) {
        c.close();
        return;
      }
      ArrayDeque<Channel> q = idle.computeIfAbsent(t, k -> new ArrayDeque<>());
      if (q.size() >= settings.maxIdlePerUpstream()) {
        c.close();
        return;
      }
      h.idleSince = System.nanoTime();
      q.addLast(c);
      size++;
      // A read stays pending while idle, so an upstream that closes the connection is noticed
      // (channelInactive) rather than found dead by the next call.
      c.read();
      if (!sweeping) {
        sweeping = true;
        long every = Math.max(1_000, settings.keepAlive().toMillis() / 2);
        loop.schedule(this::sweep, every, TimeUnit.MILLISECONDS);
      }
    }

    /** Forgets {@code c} (it closed while idle). */
    void remove(Target t, Channel c) {
      ArrayDeque<Channel> q = idle.get(t);
      if (q != null && q.remove(c)) {
        size--;
      }
    }

    private void sweep() {
      long limit = settings.keepAlive().toNanos();
      long now = System.nanoTime();
      boolean any = false;
      for (ArrayDeque<Channel> q : idle.values()) {
        for (var it = q.iterator(); it.hasNext(); ) {
          Channel c = it.next();
          UpstreamCall.Handler h = c.pipeline().get(UpstreamCall.Handler.class);
          if (!c.isActive() || h == null || now - h.idleSince >= limit) {
            it.remove();
            size--;
            c.close();
          }
        }
        any |= !q.isEmpty();
      }
      idle.values().removeIf(ArrayDeque::isEmpty);
      sweeping = false;
      if (any && !closed) {
        sweeping = true;
        long every = Math.max(1_000, settings.keepAlive().toMillis() / 2);
        loop.schedule(this::sweep, every, TimeUnit.MILLISECONDS);
      }
    }

    void closeAll() {
      for (ArrayDeque<Channel> q : idle.values()) {
        for (Channel c : q) {
          c.close();
        }
      }
      idle.clear();
      size = 0;
    }
  }
}
