package io.kvroute.edge.internal;

import io.kvroute.edge.AdminConfig;
import io.kvroute.edge.EdgeBindException;
import io.kvroute.edge.EdgeConfigException;
import io.kvroute.edge.EdgeLimits;
import io.kvroute.edge.EdgeStats;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslHandler;
import io.netty.util.concurrent.DefaultThreadFactory;
import io.netty.util.concurrent.GlobalEventExecutor;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Netty server behind {@code EdgeServer}: one event-loop group (epoll when available and asked
 * for, NIO otherwise) serving the traffic listener and the optional admin listener, the server-wide
 * body budget, and graceful shutdown.
 *
 * <p>Thread-safe: start and close may be called from any thread (once each).
 */
public final class NettyEdge implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(NettyEdge.class);
  private static final int ADMIN_MAX_CONNECTIONS = 64;
  private static final int ADMIN_MAX_BODY = 1 << 20;

  private final EdgeSettings settings;
  final BodyBudget budget;
  private final AtomicInteger open = new AtomicInteger();
  private final AtomicInteger adminOpen = new AtomicInteger();
  private final AtomicInteger active = new AtomicInteger();
  private final Map<EventLoop, LoopTimers> timers = new ConcurrentHashMap<>();
  private final ChannelGroup channels = new DefaultChannelGroup(GlobalEventExecutor.INSTANCE);
  private final boolean epoll;
  private EventLoopGroup group;
  private Channel trafficChannel;
  private Channel adminChannel;
  private volatile boolean draining;
  private volatile boolean closed;

  /**
   * A server, not started.
   *
   * @param settings everything it needs
   */
  public NettyEdge(EdgeSettings settings) {
    this.settings = settings;
    this.budget = new BodyBudget(settings.limits().maxBufferedBodyBytes());
    String t = settings.transport();
    if (t.equals("epoll") && !Epoll.isAvailable()) {
      throw new EdgeConfigException(
          "transport epoll is not available here ("
              + Epoll.unavailabilityCause()
              + "); use auto or nio");
    }
    this.epoll = !t.equals("nio") && Epoll.isAvailable();
  }

  /** The transport in use: {@code epoll} or {@code nio}. */
  public String transport() {
    return epoll ? "epoll" : "nio";
  }

  /**
   * Binds the listeners and starts serving.
   *
   * @throws EdgeBindException if a listener cannot be bound
   * @throws EdgeConfigException if TLS files or the admin token cannot be used
   */
  public synchronized void start() {
    if (group != null) {
      throw new IllegalStateException("started already");
    }
    SslContext tls = settings.tls() == null ? null : Tls.serverContext(settings.tls(), "listen");
    AdminConfig admin = settings.admin();
    byte[] tokenDigest = null;
    SslContext adminTls = null;
    if (admin != null) {
      tokenDigest = sha256(readToken(admin).getBytes(StandardCharsets.UTF_8));
      adminTls = admin.tls().map(c -> Tls.serverContext(c, "admin")).orElse(null);
    }
    InetSocketAddress trafficAddress = resolve(settings.host(), settings.port());
    InetSocketAddress adminAddress = admin == null ? null : resolve(admin.host(), admin.port());
    if (adminAddress != null && !adminAddress.getAddress().isLoopbackAddress()) {
      log.warn(
          "the admin listener is on {}, reachable from other hosts; keep its token secret{}",
          adminAddress,
          adminTls == null ? " and consider TLS (admin.tls)" : "");
    }
    IoHandlerFactory io = epoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory();
    group =
        new MultiThreadIoEventLoopGroup(
            Math.max(1, settings.ioThreads()),
            new DefaultThreadFactory(settings.threadName(), true),
            io);
    EdgeMetrics trafficMetrics =
        new EdgeMetrics(settings.registry(), settings.metricPrefix(), "traffic", open);
    EdgeMetrics.bufferedGauge(settings.registry(), settings.metricPrefix(), budget::used);
    Listener traffic =
        new Listener(
            "traffic",
            settings.limits(),
            settings.routes(),
            trafficMetrics,
            null,
            tls != null,
            open,
            this,
            settings.errors());
    try {
      trafficChannel = bind(traffic, tls, trafficAddress);
      if (admin != null) {
        EdgeLimits adminLimits =
            settings.limits().toBuilder()
                .maxConnections(ADMIN_MAX_CONNECTIONS)
                .maxBodyBytes(Math.min(ADMIN_MAX_BODY, settings.limits().maxBodyBytes()))
                .maxBufferedBodyBytes(0)
                .build();
        EdgeMetrics adminMetrics =
            new EdgeMetrics(settings.registry(), settings.metricPrefix(), "admin", adminOpen);
        Listener adminListener =
            new Listener(
                "admin",
                adminLimits,
                settings.adminRoutes(),
                adminMetrics,
                tokenDigest,
                adminTls != null,
                adminOpen,
                this,
                settings.errors());
        adminChannel = bind(adminListener, adminTls, adminAddress);
        log.info(
            "admin listener on {} ({}; bearer token from {})",
            adminChannel.localAddress(),
            adminTls == null ? "plain HTTP" : "TLS",
            admin
                .tokenFile()
                .map(p -> "file " + p)
                .orElse("$" + admin.tokenEnvironmentVariable().orElse("")));
      }
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  private static InetSocketAddress resolve(String host, int port) {
    try {
      return new InetSocketAddress(InetAddress.getByName(host), port);
    } catch (UnknownHostException e) {
      throw new EdgeBindException(
          "cannot listen on " + host + ":" + port + ": unknown host " + host, e);
    }
  }

  private Channel bind(Listener listener, SslContext tls, InetSocketAddress address) {
    Class<? extends ServerChannel> channelClass =
        epoll ? EpollServerSocketChannel.class : NioServerSocketChannel.class;
    ServerBootstrap b =
        new ServerBootstrap()
            .group(group)
            .channel(channelClass)
            .option(ChannelOption.SO_BACKLOG, 4096)
            .option(ChannelOption.SO_REUSEADDR, true)
            .childOption(ChannelOption.TCP_NODELAY, true)
            // a client's half-close ends its requests, not its connection: see Http1Connection
            .childOption(ChannelOption.ALLOW_HALF_CLOSURE, true)
            .childOption(
                ChannelOption.WRITE_BUFFER_WATER_MARK, new WriteBufferWaterMark(32 << 10, 64 << 10))
            .childHandler(
                new ChannelInitializer<SocketChannel>() {
                  @Override
                  protected void initChannel(SocketChannel ch) {
                    init(ch, listener, tls);
                  }
                });
    try {
      Channel c = b.bind(address).syncUninterruptibly().channel();
      channels.add(c);
      return c;
    } catch (Exception e) {
      throw new EdgeBindException(
          "cannot listen on "
              + address.getAddress().getHostAddress()
              + ":"
              + address.getPort()
              + ": "
              + e.getMessage(),
          e);
    }
  }

  private void init(SocketChannel ch, Listener listener, SslContext tls) {
    if (tls != null) {
      SslHandler ssl = tls.newHandler(ch.alloc());
      ssl.setHandshakeTimeoutMillis(Math.max(1, listener.limits.headerTimeout().toMillis()));
      ch.pipeline().addLast("tls", ssl);
    }
    if (closed || listener.open.incrementAndGet() > listener.limits.maxConnections()) {
      if (!closed) {
        listener.open.decrementAndGet();
      }
      listener.metrics.rejectedConnections.increment();
      ch.pipeline()
          .addLast(
              new ChannelInboundHandlerAdapter() {
                @Override
                public void channelActive(ChannelHandlerContext ctx) {
                  ctx.writeAndFlush(Unpooled.wrappedBuffer(listener.busy))
                      .addListener(ChannelFutureListener.CLOSE);
                  ctx.executor()
                      .schedule(
                          () -> {
                            ctx.close();
                          },
                          listener.limits.headerTimeout().toMillis(),
                          TimeUnit.MILLISECONDS);
                }

                @Override
                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                  io.netty.util.ReferenceCountUtil.release(msg);
                }

                @Override
                public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                  ctx.close();
                }
              });
      return;
    }
    ch.closeFuture().addListener(f -> listener.open.decrementAndGet());
    channels.add(ch);
    LoopTimers t =
        timers.computeIfAbsent(
            ch.eventLoop(),
            l ->
                new LoopTimers(
                    l,
                    settings.nanoClock(),
                    settings.wallClock(),
                    Math.max(1_000_000L, settings.timeoutTick().toNanos())));
    ch.pipeline().addLast("http", new Http1Connection(listener, t));
  }

  static String readToken(AdminConfig admin) {
    String token;
    String source;
    boolean readableByOthers = false;
    if (admin.tokenFile().isPresent()) {
      var file = admin.tokenFile().get();
      source = "admin.tokenFile " + file;
      try {
        token = Files.readString(file, StandardCharsets.UTF_8).trim();
      } catch (IOException e) {
        throw new EdgeConfigException(source + ": cannot read the token: " + e.getMessage(), e);
      }
      try {
        Set<PosixFilePermission> perms = Files.getPosixFilePermissions(file);
        readableByOthers =
            perms.contains(PosixFilePermission.OTHERS_READ)
                || perms.contains(PosixFilePermission.GROUP_READ);
      } catch (IOException | UnsupportedOperationException e) {
        // not a POSIX file system: nothing to check
      }
    } else {
      String var = admin.tokenEnvironmentVariable().orElseThrow();
      source = "admin.tokenEnv $" + var;
      String v = admin.environment().apply(var);
      token = v == null ? "" : v.trim();
    }
    if (token.isEmpty()) {
      throw new EdgeConfigException(
          source + " gives no token; the admin listener does not start without one");
    }
    if (token.length() < AdminConfig.MIN_TOKEN_LENGTH) {
      throw new EdgeConfigException(
          source
              + ": the token is shorter than "
              + AdminConfig.MIN_TOKEN_LENGTH
              + " characters; use a random one (e.g. openssl rand -hex 32)");
    }
    if (readableByOthers) {
      // Only once the token is usable: a refused token is one error line, not a warning first.
      log.warn("{} is readable by other users; chmod 600 it", source);
    }
    return token;
  }

  static byte[] sha256(byte[] b) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(b);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** The traffic listener's port. */
  public int port() {
    return ((InetSocketAddress) trafficChannel.localAddress()).getPort();
  }

  /** The admin listener's port, or -1 if there is none. */
  public int adminPort() {
    return adminChannel == null ? -1 : ((InetSocketAddress) adminChannel.localAddress()).getPort();
  }

  /** A snapshot of the counters. */
  public EdgeStats stats() {
    int[] counts = new int[5];
    for (Map.Entry<EventLoop, LoopTimers> e : timers.entrySet()) {
      EventLoop loop = e.getKey();
      LoopTimers t = e.getValue();
      if (loop.inEventLoop()) {
        t.count(counts);
        continue;
      }
      if (loop.isShuttingDown()) {
        continue;
      }
      try {
        int[] c =
            loop.submit(
                    () -> {
                      int[] part = new int[5];
                      t.count(part);
                      return part;
                    })
                .get(10, TimeUnit.SECONDS);
        for (int i = 0; i < counts.length; i++) {
          counts[i] += c[i];
        }
      } catch (InterruptedException ex) {
        Thread.currentThread().interrupt();
        break;
      } catch (java.util.concurrent.ExecutionException
          | java.util.concurrent.TimeoutException
          | java.util.concurrent.RejectedExecutionException ex) {
        // a loop that is shutting down or stuck: its connections are not counted
      }
    }
    return new EdgeStats(
        open.get(),
        adminOpen.get(),
        counts[0],
        counts[1],
        counts[2],
        counts[3],
        budget.used(),
        budget.peak(),
        budget.paused(),
        counts[4]);
  }

  boolean draining() {
    return draining;
  }

  void exchangeStarted() {
    active.incrementAndGet();
  }

  void exchangeEnded() {
    active.decrementAndGet();
  }

  /**
   * Stops accepting, lets requests in flight finish (answers carry {@code Connection: close}) for
   * up to {@code grace}, then closes everything.
   */
  public void shutdown(Duration grace) {
    draining = true;
    Channel t = trafficChannel;
    Channel a = adminChannel;
    if (t != null) {
      t.close().syncUninterruptibly();
    }
    if (a != null) {
      a.close().syncUninterruptibly();
    }
    for (Channel c : channels) {
      Http1Connection h = c.pipeline().get(Http1Connection.class);
      if (h != null) {
        c.eventLoop().execute(h::closeIfIdle);
      }
    }
    long deadline = System.nanoTime() + grace.toNanos();
    while (active.get() > 0 && System.nanoTime() - deadline < 0) {
      try {
        Thread.sleep(10);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
    }
    close();
  }

  /** Closes every listener and connection and stops the event loops. */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    draining = true;
    channels.close().awaitUninterruptibly(5, TimeUnit.SECONDS);
    EventLoopGroup g = group;
    if (g != null) {
      g.shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly(5, TimeUnit.SECONDS);
    }
  }
}
