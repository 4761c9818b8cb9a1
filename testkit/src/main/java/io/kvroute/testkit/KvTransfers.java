package io.kvroute.testkit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.kvindex.hash.BlockHash;
import io.kvroute.testkit.internal.BadRequest;
import io.kvroute.testkit.internal.BlockPool;
import io.kvroute.testkit.internal.SimHttp;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A simulator's side of prefill/decode disaggregation, per connector family: reading a request's
 * {@code kv_transfer_params} (NIXL, Mooncake) or bootstrap fields (SGLang), finding the prefill pod
 * that holds the KV, holding a prefill's KV for its decode (pulled by request id, or met in a
 * rendezvous by transfer id or bootstrap room), the NIXL parameters a prefill returns, and the
 * shared-storage (LMCache-style) save and load.
 *
 * <p>Pods find each other in this JVM by engine id and by bootstrap {@code host:port}.
 *
 * <p>Thread-safe: held KV is guarded by its map's monitor; rendezvous use concurrent futures.
 */
final class KvTransfers {
  private static final Logger LOG = LoggerFactory.getLogger(KvTransfers.class);

  /** Simulators by engine id (NIXL/Mooncake) and by bootstrap host:port (SGLang). */
  private static final Map<String, KvTransfers> BY_ENGINE = new ConcurrentHashMap<>();

  private static final Map<String, KvTransfers> BY_BOOTSTRAP = new ConcurrentHashMap<>();

  /** Simulators by P2pNccl KV address ({@code zmq_address} host:port). */
  private static final Map<String, KvTransfers> BY_P2P = new ConcurrentHashMap<>();

  /** This pod's P2pNccl KV address, once its socket is bound. */
  private volatile String p2pAddress;

  private final VllmSimulator.Builder b;
  private final BlockPool pool;
  private final Map<String, Transfer> held = new LinkedHashMap<>();
  private final Map<String, CompletableFuture<Transfer>> rendezvous = new ConcurrentHashMap<>();

  KvTransfers(VllmSimulator.Builder b, BlockPool pool) {
    this.b = b;
    this.pool = pool;
  }

  /** Prefill KV kept for a decode. */
  static final class Transfer {
    final BlockPool pool;
    final BlockPool.Seq seq;
    final int[] prompt;
    final long deadline;

    Transfer(BlockPool pool, BlockPool.Seq seq, int[] prompt, long deadline) {
      this.pool = pool;
      this.seq = seq;
      this.prompt = prompt;
      this.deadline = deadline;
    }

    /** Frees the blocks in the prefill's pool. */
    void release() {
      pool.free(seq);
    }
  }

  /** What the KV connector decided for one request. */
  static final class Plan {
    /** KV transferred from a prefill, or null. */
    Transfer incoming;

    /** Where to hold this request's KV for a decode (Mooncake, SGLang), or null. */
    String holdKey;

    /** A NIXL prefill: return {@code kv_transfer_params} and keep the KV to be pulled. */
    boolean nixlProducer;
  }

  // ---------------------------------------------------------------- registration

  /** Makes this pod findable by its engine id. */
  void registerEngine() {
    BY_ENGINE.put(b.engineId, this);
  }

  void unregisterEngine() {
    BY_ENGINE.remove(b.engineId, this);
  }

  /** Makes this pod findable by its bootstrap server's {@code host:port}. */
  void registerBootstrap(String hostPort) {
    BY_BOOTSTRAP.put(hostPort, this);
  }

  void unregisterBootstrap(String hostPort) {
    BY_BOOTSTRAP.remove(hostPort, this);
  }

  /** Makes this pod findable by its P2pNccl KV address. */
  void registerP2p(String kvAddress) {
    p2pAddress = kvAddress;
    BY_P2P.put(kvAddress, this);
  }

  void unregisterP2p(String kvAddress) {
    BY_P2P.remove(kvAddress, this);
  }

  /** Releases every KV still held for a decode (the pod closes). */
  void releaseHeld() {
    synchronized (held) {
      for (Transfer t : held.values()) {
        t.release();
      }
      held.clear();
    }
  }

  // ---------------------------------------------------------------- decisions

  /**
   * Reads the request's transfer fields (and, for P2pNccl, its id: {@code cmpl-<X-Request-Id>})
   * and, on a decode, waits for or takes the prefill's KV.
   *
   * @throws BadRequest if the transfer failed and the request must fail
   */
  Plan plan(JsonNode body, String requestId) throws BadRequest, InterruptedException {
    Plan p = new Plan();
    JsonNode ktp = body.get("kv_transfer_params");
    boolean hasKtp = ktp != null && ktp.isObject();
    switch (b.protocol) {
      case NIXL:
        if (hasKtp && ktp.path("do_remote_decode").asBoolean(false)) {
          p.nixlProducer = true;
        } else if (hasKtp && ktp.path("do_remote_prefill").asBoolean(false)) {
          p.incoming = nixlPull(ktp);
        }
        break;
      case MOONCAKE:
        if (hasKtp && ktp.path("do_remote_decode").asBoolean(false)) {
          if (ktp.hasNonNull("transfer_id")) {
            p.holdKey = "xfer:" + ktp.get("transfer_id").asText();
          } else {
            LOG.debug(
                "simulator {}: Missing transfer_id in kv_transfer_params from router!", b.name);
          }
        } else if (hasKtp && ktp.path("do_remote_prefill").asBoolean(false)) {
          p.incoming = mooncakeReceive(ktp);
        }
        break;
      case SGLANG:
        if (body.hasNonNull("bootstrap_room")) {
          String room = "room:" + body.get("bootstrap_room").asText();
          if (b.role == SimRole.PREFILL) {
            p.holdKey = room;
          } else {
            p.incoming = sglangReceive(body, room);
          }
        }
        break;
      case P2P_NCCL:
        p2pPlan(p, requestId);
        break;
      default:
        break;
    }
    return p;
  }

  /**
   * P2pNccl: a producer holds its KV for the decode address the id names, keyed by that address and
   * the id; a consumer waits for what the producer at the named prefill address holds for its own
   * address and the id. An id without the addresses fails as vLLM's {@code parse_request_id} does
   * (the engine raises {@code ValueError}).
   */
  private void p2pPlan(Plan p, String requestId) throws BadRequest, InterruptedException {
    boolean producer = b.role.producer();
    String peer =
        P2pNcclAgent.peer(requestId, producer)
            .orElseThrow(
                () ->
                    new BadRequest(
                        500, "Request id " + requestId + " does not contain hostname and port"));
    if (producer) {
      p.holdKey = "p2p:" + peer + "|" + requestId;
      return;
    }
    KvTransfers src = BY_P2P.get(peer);
    Transfer t =
        src == null ? null : src.await("p2p:" + p2pAddress + "|" + requestId, b.transferTimeout);
    if (t == null) {
      loadFailed(
          "no KV from "
              + peer
              + " for "
              + requestId
              + (src == null ? " (no pod has that KV address)" : ""));
    }
    p.incoming = t;
  }

  private Transfer nixlPull(JsonNode ktp) throws BadRequest {
    boolean complete =
        ktp.hasNonNull("remote_block_ids")
            && ktp.hasNonNull("remote_engine_id")
            && ktp.hasNonNull("remote_request_id")
            && ktp.hasNonNull("remote_host")
            && ktp.hasNonNull("remote_port");
    if (!complete) {
      LOG.debug("simulator {}: Got invalid KVTransferParams; prefilling locally", b.name);
      return null;
    }
    KvTransfers src = BY_ENGINE.get(ktp.get("remote_engine_id").asText());
    Transfer t = src == null ? null : src.take(ktp.get("remote_request_id").asText());
    if (t == null) {
      loadFailed("no held KV for remote_request_id " + ktp.get("remote_request_id").asText());
    }
    return t;
  }

  private Transfer mooncakeReceive(JsonNode ktp) throws BadRequest, InterruptedException {
    if (!ktp.hasNonNull("transfer_id")
        || !ktp.hasNonNull("remote_engine_id")
        || !ktp.hasNonNull("remote_bootstrap_addr")) {
      return null;
    }
    KvTransfers src = BY_ENGINE.get(ktp.get("remote_engine_id").asText());
    if (src == null) {
      String addr = ktp.get("remote_bootstrap_addr").asText().replaceFirst("^https?://", "");
      src = BY_BOOTSTRAP.get(addr);
    }
    Transfer t =
        src == null
            ? null
            : src.await("xfer:" + ktp.get("transfer_id").asText(), b.transferTimeout);
    if (t == null) {
      loadFailed("Mooncake transfer " + ktp.get("transfer_id").asText() + " did not arrive");
    }
    return t;
  }

  private Transfer sglangReceive(JsonNode body, String room)
      throws BadRequest, InterruptedException {
    String host = body.path("bootstrap_host").asText("");
    JsonNode port = body.get("bootstrap_port");
    int bp = port == null || port.isNull() ? b.bootstrapPort : port.asInt();
    KvTransfers src = BY_BOOTSTRAP.get(host + ":" + bp);
    if (src == null && ("localhost".equals(host) || host.isEmpty())) {
      src = BY_BOOTSTRAP.get("127.0.0.1:" + bp);
    }
    Transfer t = src == null ? null : src.await(room, b.transferTimeout);
    if (t == null) {
      throw new BadRequest(
          500, "KV transfer failed: no prefill for bootstrap room at " + host + ":" + bp);
    }
    return t;
  }

  private void loadFailed(String why) throws BadRequest {
    if (b.kvLoadFailurePolicy == VllmSimulator.KvLoadFailurePolicy.FAIL) {
      throw new BadRequest(500, "KV load failed: " + why);
    }
    LOG.debug("simulator {}: KV load failed ({}); recomputing", b.name, why);
  }

  // ---------------------------------------------------------------- holding KV

  /** Removes and returns held KV (NIXL pull). */
  private Transfer take(String key) {
    synchronized (held) {
      return held.remove("req:" + key);
    }
  }

  /** Waits for KV held under {@code key} (Mooncake, SGLang) and takes it. */
  private Transfer await(String key, Duration timeout) throws InterruptedException {
    CompletableFuture<Transfer> f = rendezvous.computeIfAbsent(key, k -> new CompletableFuture<>());
    try {
      return f.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
    } catch (TimeoutException | ExecutionException e) {
      return null;
    } finally {
      rendezvous.remove(key, f);
    }
  }

  private Transfer transfer(BlockPool.Seq seq, int[] prompt) {
    return new Transfer(pool, seq, prompt, b.nanoClock.getAsLong() + b.transferTimeout.toNanos());
  }

  /**
   * Holds a NIXL prefill's KV until its decode pulls it by request id; the oldest held KV is
   * released beyond {@code maxPendingTransfers} or after its deadline.
   */
  void holdForPull(String requestId, BlockPool.Seq seq, int[] prompt) {
    Transfer t = transfer(seq, prompt);
    List<Transfer> expired = new ArrayList<>();
    synchronized (held) {
      long now = b.nanoClock.getAsLong();
      Iterator<Transfer> it = held.values().iterator();
      while (it.hasNext()) {
        Transfer x = it.next();
        if (held.size() >= b.maxPendingTransfers || x.deadline - now <= 0) {
          it.remove();
          expired.add(x);
        } else {
          break;
        }
      }
      held.put("req:" + requestId, t);
    }
    expired.forEach(Transfer::release);
  }

  /**
   * Holds a prefill's KV under a rendezvous key (Mooncake transfer id, SGLang bootstrap room) until
   * a decode takes it; released if no decode comes within {@code transferTimeout}.
   */
  void holdForRendezvous(String key, BlockPool.Seq seq, int[] prompt) {
    Transfer t = transfer(seq, prompt);
    CompletableFuture<Transfer> f = rendezvous.computeIfAbsent(key, k -> new CompletableFuture<>());
    if (!f.complete(t)) {
      t.release();
      return;
    }
    // The decode takes the transfer within transferTimeout; otherwise release it.
    CompletableFuture.delayedExecutor(b.transferTimeout.toNanos(), TimeUnit.NANOSECONDS)
        .execute(
            () -> {
              if (rendezvous.remove(key, f)) {
                t.release();
              }
            });
  }

  /** The {@code kv_transfer_params} a NIXL prefill returns for its decode. */
  ObjectNode nixlParams(String requestId, BlockPool.Seq seq) {
    ObjectNode k = SimHttp.NODES.objectNode();
    k.put("do_remote_prefill", true);
    k.put("do_remote_decode", false);
    ArrayNode ids = k.putArray("remote_block_ids");
    for (int id : pool.blockIds(seq)) {
      ids.add(id);
    }
    k.put("remote_engine_id", b.engineId);
    k.put("remote_request_id", requestId);
    k.put("remote_host", b.sideChannelHost);
    k.put("remote_port", b.sideChannelPort);
    k.put("tp_size", 1);
    return k;
  }

  // ---------------------------------------------------------------- shared storage

  /**
   * Whether the request asks a shared-storage prefill for its first token in {@code
   * kv_transfer_params} (LMCache's own PD proxy reads it there).
   */
  boolean wantsFirstToken(JsonNode body) {
    return b.protocol == KvTransferProtocol.SHARED_STORAGE
        && body.path("kv_transfer_params").path("ret_first_tok").asBoolean(false);
  }

  /** Tokens of the prompt a shared-storage decode loads from the store; 0 for other pods. */
  int loadFromSharedStore(BlockPool.Seq seq, int promptLen) {
    if (b.protocol != KvTransferProtocol.SHARED_STORAGE || !b.role.consumer()) {
      return 0;
    }
    return b.sharedStore.prefixLength(u64(pool.hashesOf(seq, promptLen - 1))) * b.blockSize;
  }

  /** A shared-storage prefill saves the prompt's full blocks; other pods do nothing. */
  void saveToSharedStore(BlockPool.Seq seq, int promptLen) {
    if (b.protocol == KvTransferProtocol.SHARED_STORAGE && b.role.producer()) {
      b.sharedStore.save(u64(pool.hashesOf(seq, promptLen)));
    }
  }

  private static List<Long> u64(List<BlockHash> hashes) {
    List<Long> u64 = new ArrayList<>(hashes.size());
    hashes.forEach(h -> u64.add(h.u64()));
    return u64;
  }
}
