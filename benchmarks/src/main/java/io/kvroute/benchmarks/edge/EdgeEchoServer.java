package io.kvroute.benchmarks.edge;

import io.kvroute.edge.EdgeServer;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;

/**
 * A server that answers every request with the same 400-byte JSON body, on the HTTP edge (NIO or
 * epoll transport), with one event loop: the HTTP layer's own cost, measured with wrk by {@code
 * benchmarks/edge_vs_nio.sh} (which pins this JVM to one core and wrk to the other).
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar io.kvroute.benchmarks.edge.EdgeEchoServer \
 *     edge-nio|edge-epoll PORT
 * </pre>
 */
public final class EdgeEchoServer {
  private EdgeEchoServer() {}

  public static void main(String[] args) throws Exception {
    String kind = args[0];
    int port = Integer.parseInt(args[1]);
    StringBuilder json = new StringBuilder("{\"id\":\"cmpl-r\",\"object\":\"text_completion\"");
    while (json.length() < 390) {
      json.append(",\"k").append(json.length()).append("\":0");
    }
    byte[] body = json.append('}').toString().getBytes(StandardCharsets.US_ASCII);
    AutoCloseable server;
    switch (kind) {
      case "edge-nio":
      case "edge-epoll":
        server =
            EdgeServer.builder()
                .listen("127.0.0.1", port)
                .ioThreads(1)
                .transport(
                    kind.equals("edge-nio") ? EdgeServer.Transport.NIO : EdgeServer.Transport.EPOLL)
                .route("*", "/*", ex -> ex.respond(200, "application/json", body))
                .build()
                .start();
        break;
      default:
        throw new IllegalArgumentException("edge-nio or edge-epoll, not " + kind);
    }
    System.out.println("ready " + kind + " on " + port);
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  try {
                    server.close();
                  } catch (Exception e) {
                    // exiting
                  }
                }));
    new CountDownLatch(1).await();
  }
}
