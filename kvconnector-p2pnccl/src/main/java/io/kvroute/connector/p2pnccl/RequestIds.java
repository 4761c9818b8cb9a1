package io.kvroute.connector.p2pnccl;

import java.util.Optional;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The request id through which vLLM's P2pNccl proxy addresses a request's KV transfer: {@code
 * ___prefill_addr_<P kv host:port>___decode_addr_<D kv host:port>_<uuid4 hex>}, sent as {@code
 * X-Request-Id} to both instances ({@code disagg_proxy_p2p_nccl_xpyd.py}), and read back the way
 * {@code P2pNcclConnector.parse_request_id} reads it: the producer (prefill) takes the decode
 * address, {@code ___decode_addr_(.*):(\d+)}; the consumer (decode) the prefill address, {@code
 * ___prefill_addr_(.*):(\d+)___}. Both searches are unanchored and greedy, so vLLM's own prefixes
 * and suffixes ({@code cmpl-...-0}) do not disturb them, and a suffix holding {@code :<digits>}
 * would: the suffix is always 32 hex digits.
 */
final class RequestIds {
  private RequestIds() {}

  private static final Pattern DECODE = Pattern.compile("___decode_addr_(.*):(\\d+)");
  private static final Pattern PREFILL = Pattern.compile("___prefill_addr_(.*):(\\d+)___");

  /**
   * The request id for a transfer from the instance whose KV address is {@code prefill} to the one
   * at {@code decode} (each {@code host:port} exactly as the instance registered it), with {@code
   * id}.
   */
  static String format(String prefill, String decode, UUID id) {
    return "___prefill_addr_" + prefill + "___decode_addr_" + decode + "_" + hex(id);
  }

  /** A UUID as Python's {@code uuid.uuid4().hex}: 32 lower-case hex digits, no dashes. */
  static String hex(UUID id) {
    String h = Long.toHexString(id.getMostSignificantBits());
    String l = Long.toHexString(id.getLeastSignificantBits());
    return "0".repeat(16 - h.length()) + h + "0".repeat(16 - l.length()) + l;
  }

  /**
   * The address an instance reads from {@code requestId}, as vLLM's {@code parse_request_id}: the
   * decode address for a producer ({@code prefill} true), the prefill address for a consumer; empty
   * where vLLM raises {@code ValueError}.
   */
  static Optional<KvAddress> parse(String requestId, boolean prefill) {
    Matcher m = (prefill ? DECODE : PREFILL).matcher(requestId);
    if (!m.find()) {
      return Optional.empty();
    }
    String digits = m.group(2);
    if (digits.length() > 5 || Integer.parseInt(digits) > 65535) {
      return Optional.empty(); // vLLM would take it, and fail to connect
    }
    return Optional.of(new KvAddress(m.group(1), Integer.parseInt(digits)));
  }
}
