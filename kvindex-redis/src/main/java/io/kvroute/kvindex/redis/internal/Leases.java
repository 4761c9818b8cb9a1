package io.kvroute.kvindex.redis.internal;

import io.kvroute.kvindex.redis.RedisIndexConfig.IngestMode;
import io.kvroute.kvindex.redis.internal.Scripts.Script;
import io.lettuce.core.ScriptOutputType;
import java.security.SecureRandom;
import java.util.ArrayDeque;
import java.util.Collections;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * Which replica writes a pod's events: under {@link IngestMode#LEASED}, the holder of the pod's
 * lease ({@code lease.lua}: taken with the first event, renewed every third of {@code leaseTtl},
 * released on close); every write carries the token, and the write script refuses it from anyone
 * else. A replica that does not hold the lease keeps the pod's recent events and replays them when
 * it takes the lease over. Under {@link IngestMode#ALL_REPLICAS} every op is queued at once.
 *
 * <p><b>Thread-safety.</b> Thread-safe: the leases are in a concurrent map, each guarded by its own
 * monitor; counters are adders.
 */
final class Leases extends IndexPart {
  private static final int MAX_BACKLOG = 256;

  private final Pods pods;
  private final ConcurrentHashMap<String, Lease> leases = new ConcurrentHashMap<>();
  private final SecureRandom random = new SecureRandom();
  final LongAdder buffered = new LongAdder();
  final LongAdder fenced = new LongAdder();
  final LongAdder lost = new LongAdder();

  Leases(RedisIndexImpl index) {
    super(index);
    this.pods = index.pods;
  }

  /** Queues an op (through the pod's lease under LEASED). */
  void submit(WriteOp op) {
    if (rc.ingestMode() != IngestMode.LEASED) {
      if (!client.submit(op)) {
        op.dropped("queue_full");
      }
      return;
    }
    Lease l = leases.computeIfAbsent(op.podName, k -> new Lease());
    synchronized (l) {
      long now = now();
      if (l.token == null && now >= l.nextAttempt) {
        acquire(l, op.podName, op.pod, now);
      }
      if (l.token != null) {
        op.token = l.tokenBytes;
        if (!client.submit(op)) {
          op.dropped("queue_full");
        }
        return;
      }
      // keep the last 2 lease TTLs (at most MAX_BACKLOG events): what a crashed writer may not
      // have written before its lease expired
      buffered.increment();
      op.born = now;
      l.backlog.addLast(op);
      long horizon = now - 2 * rc.leaseTtl().toNanos();
      while (l.backlog.size() > MAX_BACKLOG || l.backlog.peekFirst().born < horizon) {
        l.backlog.removeFirst();
      }
    }
  }

  /** Tries to take the pod's lease; on success replays the backlog. Caller holds {@code l}. */
  private void acquire(Lease l, String podName, int pod, long now) {
    String token = rc.replicaId() + "/" + Long.toHexString(random.nextLong());
    if (call('A', podName, pod, token)) {
      l.token = token;
      l.tokenBytes = Bytes.utf8(token);
      l.renewAt = now + rc.leaseTtl().toNanos() / 3;
      // replay what this replica received while another one held the lease: the writes are
      // idempotent, so re-applying what the previous holder already wrote is harmless
      for (WriteOp b : l.backlog) {
        b.token = l.tokenBytes;
        if (!client.submit(b)) {
          b.dropped("queue_full");
        }
      }
      l.backlog.clear();
    } else {
      l.nextAttempt = now + rc.leaseTtl().toNanos() / 3;
    }
  }

  private boolean call(char op, String podName, int pod, String token) {
    KeyLayout keys = index.layout(podName);
    try {
      Long r =
          client.call(
              c ->
                  client.scripts.<Long>call(
                      c,
                      Script.LEASE,
                      ScriptOutputType.INTEGER,
                      new byte[][] {keys.lease(pod)},
                      new byte[] {(byte) op},
                      Bytes.utf8(token),
                      Bytes.num(rc.leaseTtl().toMillis())),
              rc.commandTimeout(),
              "lease");
      return r != null && r == 1L;
    } catch (RedisClientImpl.Unavailable e) {
      return false;
    }
  }

  /** Renews the leases due, takes over quiet pods (called by the client's scheduler). */
  void maintain() {
    if (rc.ingestMode() != IngestMode.LEASED) {
      return;
    }
    long now = now();
    for (Map.Entry<String, Lease> e : leases.entrySet()) {
      Lease l = e.getValue();
      synchronized (l) {
        if (l.token == null) {
          // take over a quiet pod whose writer went away: what this replica buffered is replayed
          Integer pod = pods.cached(e.getKey());
          if (!l.backlog.isEmpty() && now >= l.nextAttempt && pod != null) {
            acquire(l, e.getKey(), pod, now);
          }
          continue;
        }
        if (now < l.renewAt) {
          continue;
        }
        Integer pod = pods.cached(e.getKey());
        if (pod != null && call('R', e.getKey(), pod, l.token)) {
          l.renewAt = now + rc.leaseTtl().toNanos() / 3;
        } else {
          lost(l);
        }
      }
    }
  }

  private void lost(Lease l) {
    if (l.token != null) {
      l.token = null;
      l.tokenBytes = null;
      l.nextAttempt = now();
      lost.increment();
    }
  }

  /** Releases every lease held (on close). */
  void releaseAll() {
    for (Map.Entry<String, Lease> e : leases.entrySet()) {
      Integer pod = pods.cached(e.getKey());
      if (pod != null) {
        release(e.getValue(), e.getKey(), pod);
      }
    }
    leases.clear();
  }

  /** Forgets the lease of a pod being removed: the lease, to {@link #release} later, or null. */
  Lease detach(String podName) {
    return leases.remove(podName);
  }

  /** Gives up {@code l} in Redis if it is held. */
  void release(Lease l, String podName, int pod) {
    String token;
    synchronized (l) {
      token = l.token;
      l.token = null;
    }
    if (token != null) {
      call('D', podName, pod, token);
    }
  }

  /** The script refused {@code op}: its lease was lost (the op is dropped). */
  void fenced(WriteOp op) {
    fenced.increment();
    Lease l = leases.get(op.podName);
    if (l != null) {
      synchronized (l) {
        if (l.tokenBytes == op.token) {
          lost(l);
        }
      }
    }
    op.dropped("fenced");
  }

  /** The pods whose lease this replica holds. */
  Set<String> held() {
    Set<String> out = new TreeSet<>();
    leases.forEach(
        (pod, l) -> {
          if (l.token != null) {
            out.add(pod);
          }
        });
    return Collections.unmodifiableSet(out);
  }

  /** A pod's lease; guarded by its own monitor. */
  static final class Lease {
    volatile String token;
    volatile byte[] tokenBytes;
    long renewAt;
    long nextAttempt;
    final ArrayDeque<WriteOp> backlog = new ArrayDeque<>();
  }
}
