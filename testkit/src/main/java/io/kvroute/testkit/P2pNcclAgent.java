package io.kvroute.testkit;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;
import org.zeromq.ZMQException;

/**
 * A simulated pod's side of vLLM's P2pNcclConnector (xPyD): the KV socket it binds ({@code
 * zmq_address}, a real ZMQ {@code ROUTER}, as {@code P2pNcclEngine} binds one; nothing is read from
 * it here, the transfer itself happens in process), the registration it sends to the proxy every
 * ping ({@code P2pNcclEngine.ping}: a {@code DEALER} with identity {@code zmq_address} sending
 * {@code {"type": "P"|"D", "http_address", "zmq_address"}} as msgpack), and {@code
 * parse_request_id}.
 *
 * <p>Thread-safe: one daemon thread owns both sockets; {@link #close} stops it.
 */
final class P2pNcclAgent implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(P2pNcclAgent.class);

  private static final Pattern DECODE = Pattern.compile("___decode_addr_(.*):(\\d+)");
  private static final Pattern PREFILL = Pattern.compile("___prefill_addr_(.*):(\\d+)___");

  private final VllmSimulator.Builder b;
  private final SimFaults faults;
  private final String httpAddress;
  private final ZContext context = new ZContext(1);
  private final ZMQ.Socket kvSocket;
  private final String kvAddress;
  private final Thread pinger;
  private volatile boolean closed;

  /** Binds the KV socket; {@link #start} begins registering. */
  P2pNcclAgent(VllmSimulator.Builder b, SimFaults faults, String httpAddress) {
    this.b = b;
    this.faults = faults;
    this.httpAddress = httpAddress;
    kvSocket = context.createSocket(SocketType.ROUTER);
    kvSocket.setLinger(0);
    try {
      kvSocket.bind("tcp://" + b.host + ":" + (b.p2pNcclKvPort == 0 ? "*" : b.p2pNcclKvPort));
    } catch (ZMQException e) {
      context.close();
      throw new IllegalStateException(
          "cannot bind the P2pNccl KV socket on " + b.host + ":" + b.p2pNcclKvPort, e);
    }
    String last = kvSocket.getLastEndpoint();
    kvAddress = b.host + ":" + last.substring(last.lastIndexOf(':') + 1);
    pinger = new Thread(this::ping, "vllm-sim-" + b.name + "-p2pnccl-ping");
    pinger.setDaemon(true);
  }

  /** The KV address ({@code zmq_address}): {@code host:port}. */
  String kvAddress() {
    return kvAddress;
  }

  /** Starts sending the registration, when a proxy is configured. */
  void start() {
    if (b.p2pNcclProxy != null) {
      pinger.start();
    }
  }

  /** The registration, encoded as Python's {@code msgpack.dumps} encodes a dict of str. */
  byte[] registration() {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.write(0x83); // fixmap of 3
    str(out, "type");
    str(out, b.role.producer() ? "P" : "D"); // kv_producer and kv_both are producers
    str(out, "http_address");
    str(out, httpAddress);
    str(out, "zmq_address");
    str(out, kvAddress);
    return out.toByteArray();
  }

  private static void str(ByteArrayOutputStream out, String s) {
    byte[] u = s.getBytes(StandardCharsets.UTF_8);
    if (u.length < 32) {
      out.write(0xa0 | u.length); // fixstr
    } else if (u.length < 256) {
      out.write(0xd9); // str8
      out.write(u.length);
    } else {
      out.write(0xda); // str16
      out.write(u.length >>> 8);
      out.write(u.length & 0xff);
    }
    out.write(u, 0, u.length);
  }

  private void ping() {
    String proxy = b.p2pNcclProxy.startsWith("tcp://") ? b.p2pNcclProxy : "tcp://" + b.p2pNcclProxy;
    ZMQ.Socket dealer = context.createSocket(SocketType.DEALER);
    try {
      dealer.setLinger(0);
      dealer.setIdentity(kvAddress.getBytes(StandardCharsets.UTF_8));
      dealer.setSendTimeOut(0);
      dealer.setHandshakeIvl(2000); // a stalled handshake is retried, not waited out for 30 s
      dealer.connect(proxy);
      long interval = b.p2pNcclPing.toNanos();
      while (!closed) {
        if (!faults.registrationSilenced()) {
          dealer.send(registration(), ZMQ.DONTWAIT); // dropped while the proxy is away
        }
        // vLLM's time.sleep(3) between heartbeats: real time, whatever the latency model says
        TimeUnit.NANOSECONDS.sleep(interval);
      }
    } catch (InterruptedException e) {
      if (!closed) {
        LOG.warn("simulator {}: P2pNccl registration interrupted", b.name);
      }
      Thread.currentThread().interrupt();
    } catch (RuntimeException e) {
      if (!closed) {
        LOG.warn("simulator {}: P2pNccl registration stopped", b.name, e);
      }
    } finally {
      dealer.close();
    }
  }

  /**
   * The address {@code requestId} names for this pod's peer, as vLLM's {@code parse_request_id}:
   * the decode address for a producer, the prefill address for a consumer; empty where vLLM raises.
   */
  static Optional<String> peer(String requestId, boolean producer) {
    Matcher m = (producer ? DECODE : PREFILL).matcher(requestId);
    return m.find() ? Optional.of(m.group(1) + ":" + m.group(2)) : Optional.empty();
  }

  @Override
  public void close() {
    closed = true;
    pinger.interrupt();
    try {
      pinger.join(5_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    kvSocket.close();
    context.close();
  }
}
