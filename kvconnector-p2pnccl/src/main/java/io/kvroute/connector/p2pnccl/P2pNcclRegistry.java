package io.kvroute.connector.p2pnccl;

import io.kvroute.connector.ConnectorConfigException;
import io.kvroute.connector.ConnectorListener;
import io.kvroute.connector.Endpoint;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.BiPredicate;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;
import org.zeromq.ZMQException;

/**
 * The registration listener of vLLM's P2pNccl (xPyD) deployments, as the reference proxy runs it: a
 * ZMQ {@code ROUTER} socket bound where the instances' {@code kv_connector_extra_config.proxy_ip}
 * and {@code proxy_port} point. Each instance (rank 0 of each vLLM server) connects a {@code
 * DEALER} (identity: its {@code zmq_address}) and sends, every 3 s, one msgpack map:
 *
 * <pre>
 * {@code {"type": "P" | "D", "http_address": "<host>:<http port>", "zmq_address": "<host>:<kv port>"}}
 * </pre>
 *
 * <p>An instance appears as an {@link Endpoint} when it first registers: id and URL from {@code
 * http_address}, role {@code PREFILL} for {@code "P"} (a {@code kv_producer} or {@code kv_both})
 * and {@code DECODE} for {@code "D"}, label {@value P2pNcclConnector#KV_ADDRESS_LABEL} = {@code
 * zmq_address} (what the {@code p2pnccl} connector puts in the request id). Each registration keeps
 * it for {@link Builder#ttl} (default 5 s, the reference's {@code DEFAULT_PING_SECONDS}); when its
 * heartbeats stop it expires. A registration with another role or KV address replaces the instance.
 * Unknown keys are ignored (later vLLM versions may add some).
 *
 * <p>What is dropped, and counted as {@code connectorEvent("p2pnccl", reason)} ({@code
 * kvroute.connector.events} with a Micrometer listener): {@code registration_malformed} (not a
 * single msgpack map of strings, an unknown {@code type}, an address that is not {@code host:port},
 * more than one frame), {@code registration_oversized} (more than {@link Builder#maxMessageBytes};
 * frames over 64 times that are refused by ZMQ itself, which drops the connection uncounted),
 * {@code registration_forbidden} (an {@code http_address} or {@code zmq_address} the SSRF
 * allowlist, {@link Builder#allow}, refuses: an instance can only point the proxy at addresses it
 * is allowed to reach) and {@code registration_full} (a new instance beyond {@link
 * Builder#maxInstances}). Instances joining and expiring count as {@code instance_joined} and
 * {@code instance_expired}. Each kind of refusal is logged at WARN once, then at DEBUG.
 *
 * <pre>{@code
 * PrefillTargetAllowlist allow = PrefillTargetAllowlist.builder().allowHost("10.0.0.7").build();
 * P2pNcclRegistry registry = P2pNcclRegistry.builder("tcp://0.0.0.0:30001")
 *     .allow(allow::allows)
 *     .listener(new P2pNcclRegistry.Listener() {
 *       public void joined(Endpoint e) { router.addEndpoint(e, null); }
 *       public void left(Endpoint e) { router.removeEndpoint(e.id()); }
 *     })
 *     .build()
 *     .start();
 * }</pre>
 *
 * <p>Thread-safe. One daemon thread owns the socket and the instance table; it calls the {@link
 * Listener} (one call at a time, in order) and the connector listener. {@link #endpoints} reads an
 * immutable snapshot from any thread, without the instances that expired by the injected clock.
 */
public final class P2pNcclRegistry implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(P2pNcclRegistry.class);

  /** The connector type events are reported under. */
  static final String TYPE = P2pNcclConnector.TYPE;

  /** Event: a message that is not a registration. */
  public static final String EVENT_MALFORMED = "registration_malformed";

  /** Event: a registration longer than {@link Builder#maxMessageBytes}. */
  public static final String EVENT_OVERSIZED = "registration_oversized";

  /** Event: a registration naming an address the allowlist refuses. */
  public static final String EVENT_FORBIDDEN = "registration_forbidden";

  /** Event: a new instance beyond {@link Builder#maxInstances}. */
  public static final String EVENT_FULL = "registration_full";

  /** Event: an instance appeared (or was replaced by a registration with another role or KV). */
  public static final String EVENT_JOINED = "instance_joined";

  /** Event: an instance's heartbeats stopped for longer than the TTL. */
  public static final String EVENT_EXPIRED = "instance_expired";

  /** How long a connection's ZMTP handshake may take. */
  static final int HANDSHAKE_MILLIS = 2000;

  /** The most map entries a registration may have (three are used). */
  static final int MAX_KEYS = 16;

  /** What the registry tells about instances; no-op defaults. */
  public interface Listener {
    /** An instance registered for the first time (or with another role or KV address). */
    default void joined(Endpoint endpoint) {}

    /** An instance expired (or was replaced: {@link #joined} follows with the new one). */
    default void left(Endpoint endpoint) {}

    /** A listener that does nothing. */
    Listener NONE = new Listener() {};
  }

  /** An instance and when it expires. */
  private record Instance(Endpoint endpoint, long expiresAt) {}

  private final String bindAddress;
  private final Duration ttl;
  private final int maxInstances;
  private final int maxMessageBytes;
  private final BiPredicate<String, Integer> allow;
  private final ConnectorListener events;
  private final Listener listener;
  private final LongSupplier nanoClock;
  private final long tickMillis;

  // Owned by the registry thread (handed over by start()).
  private final Map<String, Instance> table = new LinkedHashMap<>();
  private final Set<String> warned = Collections.synchronizedSet(new java.util.HashSet<>());
  private ZContext context;
  private ZMQ.Socket socket;
  private Thread thread;
  private volatile List<Instance> snapshot = List.of();
  private volatile String endpoint;
  private volatile boolean closed;

  private P2pNcclRegistry(Builder b) {
    this.bindAddress = b.bind;
    this.ttl = b.ttl;
    this.maxInstances = b.maxInstances;
    this.maxMessageBytes = b.maxMessageBytes;
    this.allow = b.allow;
    this.events = b.events;
    this.listener = b.listener;
    this.nanoClock = b.nanoClock;
    this.tickMillis = Math.max(10, Math.min(1000, ttl.toMillis() / 4));
  }

  /**
   * A builder of a registry bound at {@code bindAddress}, a ZMQ endpoint such as {@code
   * tcp://0.0.0.0:30001} (port {@code *} or 0: any free port, see {@link #endpoint}).
   */
  public static Builder builder(String bindAddress) {
    return new Builder(bindAddress);
  }

  /**
   * Binds the socket and starts listening.
   *
   * @return this
   * @throws ConnectorConfigException naming {@code registry} when the address cannot be bound
   * @throws IllegalStateException when started twice
   */
  public synchronized P2pNcclRegistry start() {
    if (context != null) {
      throw new IllegalStateException("started already");
    }
    context = new ZContext(1);
    try {
      ZMQ.Socket s = context.createSocket(SocketType.ROUTER);
      s.setLinger(0);
      // An instance's DEALER identity is its zmq_address: one that reconnects (a restart on the
      // same KV port, a connection re-established under load) while the old connection is not
      // yet torn down would otherwise be ignored, silently, until it is
      s.setRouterHandover(true);
      // A connection whose ZMTP handshake stalls is dropped after 2 s (ZMQ's default is 30 s) and
      // the instance's DEALER reconnects: seen with JeroMQ on a loaded machine, where one of
      // several instances connecting at once waited out the whole default before registering
      s.setHandshakeIvl(HANDSHAKE_MILLIS);
      s.setMaxMsgSize(64L * maxMessageBytes);
      s.setReceiveTimeOut((int) tickMillis);
      s.bind(
          bindAddress.endsWith(":0")
              ? bindAddress.substring(0, bindAddress.length() - 1) + "*"
              : bindAddress);
      socket = s;
      endpoint = s.getLastEndpoint();
    } catch (ZMQException | IllegalArgumentException e) {
      context.close();
      context = null;
      throw new ConnectorConfigException(
          "registry", "cannot bind " + bindAddress + ": " + e.getMessage());
    }
    thread = new Thread(this::run, "kvroute-p2pnccl-registry");
    thread.setDaemon(true);
    thread.start();
    log.info(
        "P2pNccl registry listening on {} (instances expire {} after their last heartbeat)",
        endpoint,
        ttl);
    return this;
  }

  /** The bound endpoint, e.g. {@code tcp://127.0.0.1:30001} (the real port); null before start. */
  public String endpoint() {
    return endpoint;
  }

  /** The live instances, in the order they first registered. */
  public List<Endpoint> endpoints() {
    long now = nanoClock.getAsLong();
    List<Endpoint> out = new ArrayList<>();
    for (Instance i : snapshot) {
      if (now - i.expiresAt() < 0) {
        out.add(i.endpoint());
      }
    }
    return out;
  }

  /** The live instances of {@code role}, in the order they first registered. */
  public List<Endpoint> endpoints(Endpoint.Role role) {
    List<Endpoint> out = new ArrayList<>();
    for (Endpoint e : endpoints()) {
      if (e.role() == role) {
        out.add(e);
      }
    }
    return out;
  }

  /** Stops listening and closes the socket; the instances are forgotten without {@code left}. */
  @Override
  public void close() {
    Thread t;
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
      t = thread;
    }
    if (t == null) {
      if (context != null) {
        context.close();
      }
      return;
    }
    try {
      t.join(TimeUnit.SECONDS.toMillis(10) + tickMillis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    snapshot = List.of();
  }

  // ------------------------------------------------------------------ the registry thread

  private void run() {
    try {
      while (!closed) {
        byte[] identity = socket.recv(0);
        if (identity != null) {
          receive();
          // take what else is waiting before the next sweep
          for (int i = 0; i < 1024 && !closed; i++) {
            identity = socket.recv(ZMQ.DONTWAIT);
            if (identity == null) {
              break;
            }
            receive();
          }
        }
        sweep();
      }
    } catch (ZMQException e) {
      if (!closed) {
        log.error("P2pNccl registry on {} stopped: {}", endpoint, e.toString());
      }
    } catch (RuntimeException | Error e) {
      log.error("P2pNccl registry on {} stopped", endpoint, e);
      throw e;
    } finally {
      socket.close();
      context.close();
    }
  }

  /** Reads the frames after an identity frame and applies the registration they hold. */
  private void receive() {
    if (!socket.hasReceiveMore()) {
      refuse(EVENT_MALFORMED, "a message without a payload frame");
      return;
    }
    byte[] payload = socket.recv(0);
    if (socket.hasReceiveMore()) {
      while (socket.hasReceiveMore()) {
        socket.recv(0);
      }
      refuse(EVENT_MALFORMED, "a message of more than one frame");
      return;
    }
    if (payload.length > maxMessageBytes) {
      refuse(
          EVENT_OVERSIZED,
          "a registration of " + payload.length + " bytes (at most " + maxMessageBytes + ")");
      return;
    }
    Registration r;
    try {
      r = Registration.decode(payload);
    } catch (Registration.Malformed m) {
      refuse(EVENT_MALFORMED, m.getMessage());
      return;
    }
    if (!allowed(r.http()) || !allowed(r.kv())) {
      refuse(
          EVENT_FORBIDDEN,
          "a registration of http_address "
              + r.httpText()
              + ", zmq_address "
              + r.kvText()
              + " (not allowed by the SSRF allowlist)");
      return;
    }
    apply(r);
  }

  private boolean allowed(KvAddress a) {
    try {
      return allow.test(a.host(), a.port());
    } catch (RuntimeException e) {
      return false;
    }
  }

  private void apply(Registration r) {
    long now = nanoClock.getAsLong();
    long expiresAt = now + ttl.toNanos();
    String id = r.httpText();
    Instance old = table.get(id);
    if (old != null && now - old.expiresAt() < 0) {
      Endpoint e = old.endpoint();
      if (e.role() == r.role() && r.kvText().equals(e.label(P2pNcclConnector.KV_ADDRESS_LABEL))) {
        table.put(id, new Instance(e, expiresAt)); // a heartbeat
        publish();
        return;
      }
    }
    if (old == null && table.size() >= maxInstances) {
      refuse(EVENT_FULL, "a new instance " + id + " beyond maxInstances " + maxInstances);
      return;
    }
    Endpoint e =
        Endpoint.builder(id, r.http().host(), r.http().port())
            .role(r.role())
            .label(P2pNcclConnector.KV_ADDRESS_LABEL, r.kvText())
            .build();
    if (old != null) {
      table.remove(id);
      tell(old.endpoint(), false);
    }
    table.put(id, new Instance(e, expiresAt));
    publish();
    log.info(
        "P2pNccl instance {} joined: {} KV at {}", id, r.role().name().toLowerCase(), r.kvText());
    events.connectorEvent(TYPE, EVENT_JOINED);
    tell(e, true);
  }

  private void sweep() {
    long now = nanoClock.getAsLong();
    List<Endpoint> expired = null;
    for (Iterator<Instance> it = table.values().iterator(); it.hasNext(); ) {
      Instance i = it.next();
      if (now - i.expiresAt() >= 0) {
        it.remove();
        if (expired == null) {
          expired = new ArrayList<>();
        }
        expired.add(i.endpoint());
      }
    }
    if (expired == null) {
      return;
    }
    publish();
    for (Endpoint e : expired) {
      log.info("P2pNccl instance {} expired (no heartbeat for {})", e.id(), ttl);
      events.connectorEvent(TYPE, EVENT_EXPIRED);
      tell(e, false);
    }
  }

  private void publish() {
    snapshot = List.copyOf(table.values());
  }

  private void tell(Endpoint e, boolean joined) {
    try {
      if (joined) {
        listener.joined(e);
      } else {
        listener.left(e);
      }
    } catch (RuntimeException ex) {
      log.warn("P2pNccl registry listener failed on {}", e.id(), ex);
    }
  }

  private void refuse(String event, String what) {
    events.connectorEvent(TYPE, event);
    if (warned.add(event)) {
      log.warn(
          "P2pNccl registry on {} dropped {} ({}; further ones at DEBUG)", endpoint, what, event);
    } else {
      log.debug("P2pNccl registry on {} dropped {} ({})", endpoint, what, event);
    }
  }

  /** Builds a {@link P2pNcclRegistry}; validates at {@link #build}. Not thread-safe. */
  public static final class Builder {
    private final String bind;
    private Duration ttl = Duration.ofSeconds(5);
    private int maxInstances = 1024;
    private int maxMessageBytes = 1024;
    private BiPredicate<String, Integer> allow;
    private ConnectorListener events = ConnectorListener.NONE;
    private Listener listener = Listener.NONE;
    private LongSupplier nanoClock = System::nanoTime;

    private Builder(String bind) {
      this.bind = Objects.requireNonNull(bind, "bind");
    }

    /**
     * How long an instance stays after its last registration (default 5 s, as the reference; vLLM
     * sends one every 3 s).
     */
    public Builder ttl(Duration ttl) {
      this.ttl = Objects.requireNonNull(ttl, "ttl");
      return this;
    }

    /** The most instances kept (default 1024); registrations of more are dropped and counted. */
    public Builder maxInstances(int maxInstances) {
      this.maxInstances = maxInstances;
      return this;
    }

    /** The longest registration read (default 1024 bytes; a real one is about 80). */
    public Builder maxMessageBytes(int maxMessageBytes) {
      this.maxMessageBytes = maxMessageBytes;
      return this;
    }

    /**
     * The SSRF allowlist: which {@code host} and {@code port} a registration may name (both its
     * HTTP and its KV address must pass), for example {@code PrefillTargetAllowlist::allows}.
     * Required: the registry would otherwise let anyone who reaches its port point the proxy's
     * requests at any address.
     */
    public Builder allow(BiPredicate<String, Integer> allow) {
      this.allow = Objects.requireNonNull(allow, "allow");
      return this;
    }

    /** Where events are counted (default none). */
    public Builder connectorListener(ConnectorListener events) {
      this.events = Objects.requireNonNull(events, "events");
      return this;
    }

    /** Who hears of instances joining and leaving (default none). */
    public Builder listener(Listener listener) {
      this.listener = Objects.requireNonNull(listener, "listener");
      return this;
    }

    /** The clock expiry is measured with (default {@link System#nanoTime}). */
    public Builder nanoClock(LongSupplier nanoClock) {
      this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
      return this;
    }

    /**
     * The registry, not started.
     *
     * @throws ConnectorConfigException naming the field that is missing or out of range
     */
    public P2pNcclRegistry build() {
      if (!bind.startsWith("tcp://")
          && !bind.startsWith("ipc://")
          && !bind.startsWith("inproc://")) {
        throw new ConnectorConfigException(
            "registry", "must be a ZMQ endpoint such as tcp://0.0.0.0:30001, was \"" + bind + "\"");
      }
      if (ttl.isNegative() || ttl.isZero()) {
        throw new ConnectorConfigException("registry.ttl", "must be > 0, was " + ttl);
      }
      if (maxInstances < 1) {
        throw new ConnectorConfigException(
            "registry.maxInstances", "must be >= 1, was " + maxInstances);
      }
      if (maxMessageBytes < 64 || maxMessageBytes > (1 << 20)) {
        throw new ConnectorConfigException(
            "registry.maxMessageBytes", "must be in 64..1048576, was " + maxMessageBytes);
      }
      if (allow == null) {
        throw new ConnectorConfigException(
            "registry.allow", "is required: the SSRF allowlist the registered addresses must pass");
      }
      return new P2pNcclRegistry(this);
    }
  }
}
