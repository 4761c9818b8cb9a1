package io.kvroute.connector.p2pnccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.connector.ConnectorConfigException;
import io.kvroute.connector.ConnectorListener;
import io.kvroute.connector.Endpoint;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * {@link P2pNcclRegistry} over real JeroMQ sockets on loopback: instances join with the message
 * vLLM's {@code P2pNcclEngine.ping} sends (a DEALER whose identity is its KV address), stay while
 * they heartbeat, expire when they stop (an injected clock, so the test waits for no real TTL), and
 * bad, oversized, forbidden and surplus registrations are counted and dropped.
 */
class P2pNcclRegistryTest {
  private static final long SECOND = 1_000_000_000L;
  private final AtomicLong now = new AtomicLong(1_000 * SECOND);
  private final ZContext zmq = new ZContext(1);
  private final Map<String, Integer> events = new ConcurrentHashMap<>();
  private final List<String> changes = new CopyOnWriteArrayList<>();
  private final List<ZMQ.Socket> dealers = new ArrayList<>();
  private P2pNcclRegistry registry;

  private final ConnectorListener counting =
      new ConnectorListener() {
        @Override
        public void connectorEvent(String type, String event) {
          assertThat(type).isEqualTo("p2pnccl");
          events.merge(event, 1, Integer::sum);
        }
      };

  private final P2pNcclRegistry.Listener recording =
      new P2pNcclRegistry.Listener() {
        @Override
        public void joined(Endpoint e) {
          changes.add(
              "+" + e.id() + " " + e.role() + " " + e.label(P2pNcclConnector.KV_ADDRESS_LABEL));
        }

        @Override
        public void left(Endpoint e) {
          changes.add("-" + e.id());
        }
      };

  private P2pNcclRegistry start(P2pNcclRegistry.Builder b) {
    registry =
        b.ttl(Duration.ofSeconds(5))
            .nanoClock(now::get)
            .connectorListener(counting)
            .listener(recording)
            .build()
            .start();
    return registry;
  }

  private P2pNcclRegistry start() {
    return start(
        P2pNcclRegistry.builder("tcp://127.0.0.1:*")
            .maxInstances(3)
            .allow((host, port) -> host.equals("127.0.0.1") || host.equals("localhost")));
  }

  @AfterEach
  void stop() {
    if (registry != null) {
      registry.close();
    }
    dealers.forEach(ZMQ.Socket::close);
    zmq.close();
  }

  /** A DEALER as vLLM's ping thread opens it: identity = its KV address. */
  private ZMQ.Socket instance(String kvAddress) {
    ZMQ.Socket d = zmq.createSocket(SocketType.DEALER);
    d.setLinger(0);
    d.setIdentity(kvAddress.getBytes(StandardCharsets.UTF_8));
    // JeroMQ's connecting side rarely stalls in its ZMTP handshake on loopback (its channel never
    // watched); JeroMQ's own 30 s default would outlast the test's wait, 1 s drops and reconnects
    // (the queued registration goes out on the new connection)
    d.setHandshakeIvl(1000);
    d.connect(registry.endpoint());
    dealers.add(d);
    return d;
  }

  static byte[] registration(String type, String http, String kv) throws IOException {
    MessageBufferPacker p = MessagePack.newDefaultBufferPacker();
    p.packMapHeader(3);
    p.packString("type").packString(type);
    p.packString("http_address").packString(http);
    p.packString("zmq_address").packString(kv);
    return p.toByteArray();
  }

  private void register(ZMQ.Socket d, String type, String http, String kv) throws IOException {
    assertThat(d.send(registration(type, http, kv))).isTrue();
  }

  private int count(String event) {
    return events.getOrDefault(event, 0);
  }

  static void await(String what, BooleanSupplier condition) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() - deadline > 0) {
        throw new AssertionError("timed out waiting until " + what);
      }
      LockSupport.parkNanos(2_000_000);
    }
  }

  @Test
  void instancesJoinWithTheirRolesAndKvAddresses() throws IOException {
    start();
    assertThat(registry.endpoint()).startsWith("tcp://127.0.0.1:");
    register(instance("127.0.0.1:21001"), "P", "127.0.0.1:20001", "127.0.0.1:21001");
    register(instance("127.0.0.1:22001"), "D", "localhost:20002", "127.0.0.1:22001");
    await("both joined", () -> registry.endpoints().size() == 2);
    Endpoint p = registry.endpoints(Endpoint.Role.PREFILL).get(0);
    assertThat(p.id()).isEqualTo("127.0.0.1:20001");
    assertThat(p.baseUrl()).isEqualTo("http://127.0.0.1:20001");
    assertThat(p.label(P2pNcclConnector.KV_ADDRESS_LABEL)).isEqualTo("127.0.0.1:21001");
    Endpoint d = registry.endpoints(Endpoint.Role.DECODE).get(0);
    assertThat(d.baseUrl()).isEqualTo("http://localhost:20002");
    assertThat(changes) // two sockets: either may be read first
        .containsExactlyInAnyOrder(
            "+127.0.0.1:20001 PREFILL 127.0.0.1:21001", "+localhost:20002 DECODE 127.0.0.1:22001");
    assertThat(count(P2pNcclRegistry.EVENT_JOINED)).isEqualTo(2);
  }

  @Test
  void heartbeatsKeepAnInstanceAndItExpiresWhenTheyStop() throws IOException {
    start();
    ZMQ.Socket p = instance("127.0.0.1:21001");
    ZMQ.Socket d = instance("127.0.0.1:22001");
    register(p, "P", "127.0.0.1:20001", "127.0.0.1:21001");
    register(d, "D", "127.0.0.1:20002", "127.0.0.1:22001");
    await("both joined", () -> registry.endpoints().size() == 2);
    // 4 s later the prefill beats again, the decode does not; a marker instance registered after
    // the heartbeat on the same socket tells when the registry has read it (one socket's
    // messages are read in order)
    now.addAndGet(4 * SECOND);
    register(p, "P", "127.0.0.1:20001", "127.0.0.1:21001");
    register(p, "P", "127.0.0.1:20009", "127.0.0.1:21009");
    await(
        "the heartbeat is read",
        () -> changes.contains("+127.0.0.1:20009 PREFILL 127.0.0.1:21009"));
    // 2 s more: 6 s since the decode's only registration, 2 s since the prefill's last
    now.addAndGet(2 * SECOND);
    assertThat(registry.endpoints())
        .extracting(Endpoint::id)
        .containsExactly("127.0.0.1:20001", "127.0.0.1:20009");
    await("the decode expires", () -> changes.contains("-127.0.0.1:20002"));
    assertThat(count(P2pNcclRegistry.EVENT_EXPIRED)).isEqualTo(1);
    assertThat(count(P2pNcclRegistry.EVENT_JOINED)).isEqualTo(3); // a heartbeat is not a join
    // the decode comes back: it joins again
    register(d, "D", "127.0.0.1:20002", "127.0.0.1:22001");
    await("the decode rejoins", () -> registry.endpoints().size() == 3);
    assertThat(count(P2pNcclRegistry.EVENT_JOINED)).isEqualTo(4);
    // and everything expires once every heartbeat stops
    now.addAndGet(10 * SECOND);
    assertThat(registry.endpoints()).isEmpty();
    await("all expire", () -> count(P2pNcclRegistry.EVENT_EXPIRED) == 4);
  }

  @Test
  void aRegistrationWithAnotherRoleOrKvAddressReplacesTheInstance() throws IOException {
    start();
    ZMQ.Socket s = instance("127.0.0.1:21001");
    register(s, "P", "127.0.0.1:20001", "127.0.0.1:21001");
    await("joined", () -> changes.size() == 1);
    register(s, "D", "127.0.0.1:20001", "127.0.0.1:21009");
    await("replaced", () -> changes.size() == 3);
    assertThat(changes)
        .containsExactly(
            "+127.0.0.1:20001 PREFILL 127.0.0.1:21001",
            "-127.0.0.1:20001",
            "+127.0.0.1:20001 DECODE 127.0.0.1:21009");
    assertThat(registry.endpoints()).hasSize(1);
  }

  @Test
  void malformedOversizedForbiddenAndSurplusRegistrationsAreCountedAndDropped() throws IOException {
    start();
    ZMQ.Socket s = instance("127.0.0.1:29999");
    s.send("not msgpack at all".getBytes(StandardCharsets.UTF_8));
    MessageBufferPacker array = MessagePack.newDefaultBufferPacker();
    array.packArrayHeader(1).packString("P");
    s.send(array.toByteArray());
    register(s, "X", "127.0.0.1:20001", "127.0.0.1:21001"); // unknown type
    register(s, "P", "127.0.0.1", "127.0.0.1:21001"); // no port
    register(s, "P", "127.0.0.1:20001", "127.0.0.1:70000"); // port out of range
    MessageBufferPacker missing = MessagePack.newDefaultBufferPacker();
    missing.packMapHeader(1).packString("type").packString("P");
    s.send(missing.toByteArray());
    MessageBufferPacker wrongType = MessagePack.newDefaultBufferPacker();
    wrongType.packMapHeader(3);
    wrongType.packString("type").packString("P");
    wrongType.packString("http_address").packInt(20001);
    wrongType.packString("zmq_address").packString("127.0.0.1:21001");
    s.send(wrongType.toByteArray());
    s.sendMore("two");
    s.send("frames");
    await("8 malformed", () -> count(P2pNcclRegistry.EVENT_MALFORMED) == 8);

    s.send(registration("P", "127.0.0.1:20001", "127.0.0.1:" + "2".repeat(2000)));
    await("1 oversized", () -> count(P2pNcclRegistry.EVENT_OVERSIZED) == 1);

    register(s, "P", "169.254.169.254:80", "127.0.0.1:21001"); // the metadata server: no
    register(s, "D", "127.0.0.1:20002", "10.1.2.3:22001"); // a KV address elsewhere: no
    await("2 forbidden", () -> count(P2pNcclRegistry.EVENT_FORBIDDEN) == 2);
    assertThat(registry.endpoints()).isEmpty();

    // unknown extra keys are fine (a later vLLM may add some)
    MessageBufferPacker extra = MessagePack.newDefaultBufferPacker();
    extra.packMapHeader(4);
    extra.packString("type").packString("P");
    extra.packString("http_address").packString("127.0.0.1:20001");
    extra.packString("zmq_address").packString("127.0.0.1:21001");
    extra.packString("dp_rank").packInt(0);
    s.send(extra.toByteArray());
    for (int i = 2; i <= 4; i++) {
      register(s, "D", "127.0.0.1:2000" + i, "127.0.0.1:2200" + i);
    }
    await("3 joined, 1 refused", () -> count(P2pNcclRegistry.EVENT_FULL) == 1);
    assertThat(registry.endpoints())
        .extracting(Endpoint::id)
        .containsExactly("127.0.0.1:20001", "127.0.0.1:20002", "127.0.0.1:20003");
    // the registry still serves after all that
    register(s, "P", "127.0.0.1:20001", "127.0.0.1:21001");
    assertThat(count(P2pNcclRegistry.EVENT_MALFORMED)).isEqualTo(8);
  }

  @Test
  void theBuilderRefusesWhatCannotWork() {
    assertThatThrownBy(() -> P2pNcclRegistry.builder("tcp://127.0.0.1:0").build())
        .isInstanceOf(ConnectorConfigException.class)
        .hasMessageContaining("registry.allow");
    assertThatThrownBy(
            () -> P2pNcclRegistry.builder("127.0.0.1:30001").allow((h, p) -> true).build())
        .hasMessageContaining("ZMQ endpoint");
    assertThatThrownBy(
            () ->
                P2pNcclRegistry.builder("tcp://127.0.0.1:0")
                    .allow((h, p) -> true)
                    .ttl(Duration.ZERO)
                    .build())
        .hasMessageContaining("registry.ttl");
    start();
    String taken = registry.endpoint();
    assertThatThrownBy(() -> P2pNcclRegistry.builder(taken).allow((h, p) -> true).build().start())
        .isInstanceOf(ConnectorConfigException.class)
        .hasMessageContaining("cannot bind " + taken);
  }
}
