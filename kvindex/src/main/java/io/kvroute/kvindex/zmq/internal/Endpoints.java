package io.kvroute.kvindex.zmq.internal;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** ZMQ endpoint helpers mirroring vLLM's. Stateless; thread-safe. */
public final class Endpoints {

  private static final Pattern TCP_PORT = Pattern.compile("^(tcp://.*):(\\d+)$");

  private Endpoints() {}

  /**
   * vLLM's {@code offset_endpoint_port}: rank 0 keeps the endpoint; {@code tcp} gets its last port
   * + rank (port 0 is not offset); {@code inproc} gets {@code _dp<rank>}; anything else with rank
   * &gt; 0 is an error.
   */
  public static String offset(String endpoint, int rank) {
    if (rank == 0) {
      return endpoint;
    }
    if (rank < 0) {
      throw new IllegalArgumentException("dp rank must be >= 0, was " + rank);
    }
    Matcher m = TCP_PORT.matcher(endpoint);
    if (m.matches()) {
      int port = Integer.parseInt(m.group(2));
      return port == 0 ? endpoint : m.group(1) + ":" + (port + rank);
    }
    if (endpoint.startsWith("inproc://")) {
      return endpoint + "_dp" + rank;
    }
    throw new IllegalArgumentException(
        "cannot offset endpoint "
            + endpoint
            + " for data-parallel rank "
            + rank
            + " (only tcp:// and inproc:// endpoints can be offset)");
  }

  /** vLLM's rule: bind when the endpoint has {@code *} or {@code ::}, or is ipc/inproc. */
  public static boolean vllmBinds(String endpoint) {
    return endpoint.contains("*")
        || endpoint.contains("::")
        || endpoint.startsWith("ipc://")
        || endpoint.startsWith("inproc://");
  }

  /** 8-byte big-endian encoding of an unsigned 64-bit sequence number (a fresh array). */
  public static byte[] seqBytes(long seq) {
    byte[] b = new byte[8];
    for (int i = 0; i < 8; i++) {
      b[i] = (byte) (seq >>> (56 - 8 * i));
    }
    return b;
  }

  /** Reads a big-endian unsigned sequence of 1..8 bytes; -1 (all ones) for longer values. */
  public static long seqOf(byte[] b) {
    long v = 0;
    int start = 0;
    if (b.length > 8) {
      for (int i = 0; i < b.length - 8; i++) {
        if (b[i] != 0) {
          return -1L;
        }
      }
      start = b.length - 8;
    }
    for (int i = start; i < b.length; i++) {
      v = (v << 8) | (b[i] & 0xffL);
    }
    return v;
  }
}
