package io.kvroute.connector.contract;

import io.kvroute.connector.Endpoint;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Locale;

/**
 * A pod on a raw socket that takes one request, answers 200 with the head of a chunked SSE stream
 * and {@code chunk} (or no chunk at all), then drops the connection: a stream that breaks before it
 * ends, which MockWebServer cannot send. Closing it stops the pod and waits for its thread.
 */
public final class DroppingPod implements AutoCloseable {
  private final ServerSocket socket;
  private final Thread thread;

  /** Starts the pod on a loopback port; {@code chunk} may be null for a stream with no bytes. */
  public DroppingPod(String chunk) throws IOException {
    socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
    thread = new Thread(() -> serveOnce(chunk), "dropping-pod");
    thread.setDaemon(true);
    thread.start();
  }

  /** This pod as endpoint {@code id} in {@code role}. */
  public Endpoint endpoint(String id, Endpoint.Role role) {
    return Endpoint.builder(id, "127.0.0.1", socket.getLocalPort()).role(role).build();
  }

  private void serveOnce(String chunk) {
    try (Socket s = socket.accept()) {
      readRequest(s.getInputStream());
      StringBuilder sb =
          new StringBuilder(
              "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                  + "Transfer-Encoding: chunked\r\n\r\n");
      if (chunk != null) {
        sb.append(Integer.toHexString(chunk.length())).append("\r\n").append(chunk).append("\r\n");
      }
      s.getOutputStream().write(sb.toString().getBytes(StandardCharsets.UTF_8));
      s.getOutputStream().flush();
    } catch (IOException e) {
      // the test fails on its own assertions
    }
  }

  /** Reads an HTTP/1.1 request head and its Content-Length body from {@code in}. */
  private static void readRequest(InputStream in) throws IOException {
    StringBuilder head = new StringBuilder();
    while (!head.toString().endsWith("\r\n\r\n")) {
      int c = in.read();
      if (c < 0) {
        return;
      }
      head.append((char) c);
    }
    int length = 0;
    for (String line : head.toString().split("\r\n")) {
      if (line.toLowerCase(Locale.ROOT).startsWith("content-length:")) {
        length = Integer.parseInt(line.substring(15).trim());
      }
    }
    in.readNBytes(length);
  }

  /** Stops listening (a pod never called stops waiting) and waits for the pod's thread. */
  @Override
  public void close() throws IOException {
    socket.close();
    try {
      thread.join(10_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
