package io.kvroute.kvindex.zmq;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.channels.SelectableChannel;
import java.nio.channels.SocketChannel;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A TCP endpoint in front of a ZMQ endpoint that holds its first {@code stalls} connections open
 * without completing their ZMTP handshake, and forwards the later ones byte for byte.
 *
 * <p>What a held connection shows the subscriber is what it sees when JeroMQ 0.6.0 loses a
 * connect-side connection (see {@code ReplayClient#run}): vLLM's libzmq socket accepted it and sent
 * the 10 bytes that open its ZMTP greeting (libzmq's {@code stream_engine} does so on accept, then
 * waits for the peer's), and nothing more ever happens on it. JeroMQ's own state in that bug (the
 * channel watched by no selector) cannot be produced from outside, so {@link #isHeld} stands in for
 * the subscriber's check of it ({@code KvEventSubscriber.Builder#stallCheck}).
 *
 * <p>Thread-safe; one thread accepts, two threads pump each forwarded connection.
 */
final class StallingProxy implements AutoCloseable {
  /** The first 10 bytes of a ZMTP 3 greeting: what libzmq sends on accept. */
  private static final byte[] SIGNATURE = {(byte) 0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f};

  private final ServerSocket server;
  private final int targetPort;
  private final AtomicInteger stallsLeft;
  private final Set<Integer> heldClientPorts = ConcurrentHashMap.newKeySet();
  private final List<Socket> open = new CopyOnWriteArrayList<>();
  private final AtomicInteger accepted = new AtomicInteger();
  private volatile boolean closed;

  /** Listens on loopback in front of {@code target} ({@code tcp://127.0.0.1:port}). */
  StallingProxy(String target, int stalls) throws IOException {
    this.targetPort = Integer.parseInt(target.substring(target.lastIndexOf(':') + 1));
    this.stallsLeft = new AtomicInteger(stalls);
    this.server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    Thread t = new Thread(this::accept, "stalling-proxy");
    t.setDaemon(true);
    t.start();
  }

  /** The endpoint to give the subscriber. */
  String endpoint() {
    return "tcp://127.0.0.1:" + server.getLocalPort();
  }

  /** Connections accepted so far (held or forwarded). */
  int accepted() {
    return accepted.get();
  }

  /** Whether {@code channel} is the client end of a connection this proxy holds. */
  boolean isHeld(SelectableChannel channel) {
    if (channel instanceof SocketChannel sc && sc.isOpen()) {
      try {
        return sc.getLocalAddress() instanceof InetSocketAddress a
            && heldClientPorts.contains(a.getPort());
      } catch (IOException e) {
        return false;
      }
    }
    return false;
  }

  private void accept() {
    while (!closed) {
      try {
        Socket c = server.accept();
        accepted.incrementAndGet();
        open.add(c);
        if (stallsLeft.getAndDecrement() > 0) {
          heldClientPorts.add(c.getPort());
          c.getOutputStream().write(SIGNATURE);
          c.getOutputStream().flush();
          continue; // and never anything more
        }
        Socket t = new Socket(InetAddress.getLoopbackAddress(), targetPort);
        open.add(t);
        pump(c, t);
        pump(t, c);
      } catch (IOException e) {
        if (!closed) {
          throw new java.io.UncheckedIOException(e);
        }
      }
    }
  }

  private void pump(Socket from, Socket to) {
    Thread t =
        new Thread(
            () -> {
              byte[] buf = new byte[65536];
              try (InputStream in = from.getInputStream();
                  OutputStream out = to.getOutputStream()) {
                int n;
                while ((n = in.read(buf)) >= 0) {
                  out.write(buf, 0, n);
                  out.flush();
                }
              } catch (IOException e) {
                // a side closed: the other follows
              } finally {
                closeQuietly(from);
                closeQuietly(to);
              }
            },
            "stalling-proxy-pump");
    t.setDaemon(true);
    t.start();
  }

  @Override
  public void close() {
    closed = true;
    closeQuietly(server);
    for (Socket s : open) {
      closeQuietly(s);
    }
  }

  private static void closeQuietly(AutoCloseable c) {
    try {
      c.close();
    } catch (Exception e) {
      // closing anyway
    }
  }
}
