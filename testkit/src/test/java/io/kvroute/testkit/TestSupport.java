package io.kvroute.testkit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvroute.kvindex.event.KvEventBatch;
import io.kvroute.kvindex.event.KvEventCodec;
import io.kvroute.kvindex.vectors.GoldenVectors;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/** HTTP, ZMQ and vector helpers for the testkit tests. */
final class TestSupport {
  static final ObjectMapper JSON = new ObjectMapper();
  static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  private TestSupport() {}

  static VllmSimulator.Builder sim() {
    return VllmSimulator.builder().latency(LatencyModel.ZERO);
  }

  static HttpResponse<String> post(VllmSimulator sim, String path, String body) {
    return post(sim, path, body, Map.of());
  }

  static HttpResponse<String> post(
      VllmSimulator sim, String path, String body, Map<String, String> headers) {
    HttpRequest.Builder rb =
        HttpRequest.newBuilder(URI.create(sim.baseUrl() + path))
            .timeout(Duration.ofSeconds(20))
            .header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body));
    headers.forEach(rb::header);
    try {
      return HTTP.send(rb.build(), HttpResponse.BodyHandlers.ofString());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  static HttpResponse<String> get(VllmSimulator sim, String path) {
    try {
      return HTTP.send(
          HttpRequest.newBuilder(URI.create(sim.baseUrl() + path))
              .timeout(Duration.ofSeconds(20))
              .GET()
              .build(),
          HttpResponse.BodyHandlers.ofString());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  static JsonNode json(String s) {
    try {
      return JSON.readTree(s);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static String completion(Object prompt, int maxTokens) {
    try {
      return JSON.writeValueAsString(
          Map.of("model", "sim-model", "prompt", prompt, "max_tokens", maxTokens));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static int[] tokens(int n, int salt) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = 1000 + (i * 31 + salt * 7919) % 50_000;
    }
    return t;
  }

  /** A golden vector file from kvindex's test-jar (vLLM's own hashes and payloads). */
  static JsonNode vectors(String name) {
    return GoldenVectors.read(name);
  }

  /** One received PUB message. */
  record Msg(String topic, long seq, byte[] payload) {
    KvEventBatch batch() {
      return KvEventCodec.decode(payload);
    }
  }

  /** A real JeroMQ SUB socket on a simulator's publisher, synchronised before use. */
  static final class Sub implements AutoCloseable {
    final ZContext ctx = new ZContext(1);
    ZMQ.Socket socket;

    Sub(VllmSimulator sim) {
      this(sim.eventsEndpoint(), "kv@");
      // Slow-joiner handshake: emit AllBlocksCleared until one arrives. JeroMQ 0.6.0 SUB sockets
      // connecting to a just-bound PUB occasionally never receive anything (about 1 in 80 here);
      // a fresh socket does, so re-create the socket after a second of silence.
      long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
      long reconnectAt = System.nanoTime() + Duration.ofSeconds(1).toNanos();
      while (true) {
        sim.resetPrefixCache();
        if (next(100) != null) {
          break;
        }
        long now = System.nanoTime();
        if (now > deadline) {
          throw new IllegalStateException("SUB never received the handshake batch");
        }
        if (now > reconnectAt) {
          socket.close();
          socket = open(sim.eventsEndpoint(), "kv@");
          reconnectAt = now + Duration.ofSeconds(1).toNanos();
        }
      }
      drain();
    }

    Sub(String endpoint, String filter) {
      socket = open(endpoint, filter);
    }

    private ZMQ.Socket open(String endpoint, String filter) {
      ZMQ.Socket s = ctx.createSocket(SocketType.SUB);
      s.setLinger(0);
      s.setHandshakeIvl(1000); // a rare stalled JeroMQ handshake is retried, not waited out 30 s
      s.connect(endpoint);
      s.subscribe(filter.getBytes(ZMQ.CHARSET));
      return s;
    }

    Msg next(int timeoutMs) {
      socket.setReceiveTimeOut(timeoutMs);
      byte[] topic = socket.recv();
      if (topic == null) {
        return null;
      }
      byte[] seq = socket.recv();
      byte[] payload = socket.recv();
      long s = 0;
      for (byte b : seq) {
        s = (s << 8) | (b & 0xff);
      }
      return new Msg(new String(topic, ZMQ.CHARSET), s, payload);
    }

    Msg expect() {
      Msg m = next(5000);
      if (m == null) {
        throw new AssertionError("no event batch within 5 s");
      }
      return m;
    }

    List<Msg> drain() {
      List<Msg> out = new ArrayList<>();
      Msg m;
      while ((m = next(50)) != null) {
        out.add(m);
      }
      return out;
    }

    @Override
    public void close() {
      ctx.close();
    }
  }
}
