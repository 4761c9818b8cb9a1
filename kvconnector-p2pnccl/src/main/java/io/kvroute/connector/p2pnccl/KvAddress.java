package io.kvroute.connector.p2pnccl;

import java.util.Optional;

/**
 * A {@code host:port} as vLLM's P2pNcclEngine writes its addresses ({@code http_address}, {@code
 * zmq_address}): the host as given (a name, an IPv4 literal, an IPv6 literal with or without
 * brackets), the port after the last colon.
 *
 * @param host the host, without brackets
 * @param port 1 to 65535
 */
record KvAddress(String host, int port) {

  /** The longest host accepted (a DNS name is at most 253 characters). */
  static final int MAX_HOST = 253;

  /**
   * Parses {@code host:port}; empty when it is not one (no port, a port out of range, an empty
   * host, characters no host name or IP literal has).
   */
  static Optional<KvAddress> parse(String text) {
    if (text == null) {
      return Optional.empty();
    }
    String v = text.trim();
    String host;
    String port;
    if (v.startsWith("[")) {
      int close = v.indexOf(']');
      if (close < 0 || close + 1 >= v.length() || v.charAt(close + 1) != ':') {
        return Optional.empty();
      }
      host = v.substring(1, close);
      port = v.substring(close + 2);
    } else {
      int colon = v.lastIndexOf(':');
      if (colon <= 0) {
        return Optional.empty();
      }
      host = v.substring(0, colon);
      port = v.substring(colon + 1);
    }
    if (host.isEmpty() || host.length() > MAX_HOST || port.isEmpty() || port.length() > 5) {
      return Optional.empty();
    }
    for (int i = 0; i < port.length(); i++) {
      if (port.charAt(i) < '0' || port.charAt(i) > '9') {
        return Optional.empty();
      }
    }
    int p = Integer.parseInt(port);
    if (p < 1 || p > 65535) {
      return Optional.empty();
    }
    for (int i = 0; i < host.length(); i++) {
      char c = host.charAt(i);
      boolean ok =
          (c >= 'a' && c <= 'z')
              || (c >= 'A' && c <= 'Z')
              || (c >= '0' && c <= '9')
              || c == '-'
              || c == '.'
              || c == ':'
              || c == '_';
      if (!ok) {
        return Optional.empty();
      }
    }
    return Optional.of(new KvAddress(host, p));
  }

  /** {@code host:port}, an IPv6 host in brackets. */
  @Override
  public String toString() {
    return (host.indexOf(':') >= 0 ? "[" + host + "]" : host) + ":" + port;
  }
}
