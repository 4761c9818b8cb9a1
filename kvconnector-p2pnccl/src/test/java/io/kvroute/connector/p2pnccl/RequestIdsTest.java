package io.kvroute.connector.p2pnccl;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.UUID;
import org.junit.jupiter.api.Test;

/** The addressed request id, formatted as vLLM's proxy does and parsed as vLLM's connector does. */
class RequestIdsTest {

  @Test
  void formatsAsTheReferenceProxy() {
    String id =
        RequestIds.format(
            "10.0.0.1:21001",
            "10.0.0.2:22001",
            UUID.fromString("00000000-0000-0000-0000-00000000000a"));
    assertThat(id)
        .isEqualTo(
            "___prefill_addr_10.0.0.1:21001___decode_addr_10.0.0.2:22001_"
                + "0000000000000000000000000000000a");
    UUID random = UUID.randomUUID();
    assertThat(RequestIds.hex(random))
        .hasSize(32)
        .matches("[0-9a-f]{32}")
        .isEqualTo(random.toString().replace("-", ""));
  }

  @Test
  void eachSideFindsItsPeerThroughVllmsPrefixesAndSuffixes() {
    String id =
        RequestIds.format("node-a.local:21001", "node-b.local:22001", new UUID(0xfeedL, 0xbeefL));
    for (String seen : new String[] {id, "cmpl-" + id + "-0", "chatcmpl-" + id, id + "-3a2b"}) {
      assertThat(RequestIds.parse(seen, true)).contains(new KvAddress("node-b.local", 22001));
      assertThat(RequestIds.parse(seen, false)).contains(new KvAddress("node-a.local", 21001));
    }
  }

  @Test
  void ipv6AddressesParseWithTheGreedyPatterns() {
    String id = RequestIds.format("[fd00::1]:21001", "fd00::2:22001", new UUID(1, 2));
    assertThat(RequestIds.parse(id, true)).contains(new KvAddress("fd00::2", 22001));
    assertThat(RequestIds.parse(id, false)).contains(new KvAddress("[fd00::1]", 21001));
  }

  @Test
  void idsWithoutAddressesAreWhatVllmRaisesOn() {
    assertThat(RequestIds.parse("kvr-1234", true)).isEmpty();
    assertThat(RequestIds.parse("kvr-1234", false)).isEmpty();
    assertThat(RequestIds.parse("___prefill_addr_h:99999___decode_addr_h:1_x", false)).isEmpty();
  }

  @Test
  void addressesParseLikeHostPort() {
    assertThat(KvAddress.parse("10.0.0.1:21001")).contains(new KvAddress("10.0.0.1", 21001));
    assertThat(KvAddress.parse("[fd00::1]:8000")).contains(new KvAddress("fd00::1", 8000));
    assertThat(KvAddress.parse("fd00::1:8000")).contains(new KvAddress("fd00::1", 8000));
    assertThat(KvAddress.parse("fd00::1:8000").orElseThrow().toString())
        .isEqualTo("[fd00::1]:8000");
    for (String bad :
        new String[] {
          "", "host", ":80", "h:0", "h:65536", "h:8o", "h/x:80", "[::1]80", "h:123456"
        }) {
      assertThat(KvAddress.parse(bad)).as(bad).isEmpty();
    }
  }
}
