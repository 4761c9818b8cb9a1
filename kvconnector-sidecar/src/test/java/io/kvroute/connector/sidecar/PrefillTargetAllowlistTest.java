package io.kvroute.connector.sidecar;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.connector.ConnectorException.ForbiddenTargetException;
import io.kvroute.connector.ConnectorException.InvalidRequestException;
import io.kvroute.connector.ConnectorListener;
import io.kvroute.connector.Endpoint;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class PrefillTargetAllowlistTest {

  private final List<String> events = Collections.synchronizedList(new ArrayList<>());
  private final ConnectorListener listener =
      new ConnectorListener() {
        @Override
        public void connectorEvent(String connectorType, String event) {
          events.add(connectorType + ":" + event);
        }
      };

  private final Endpoint podA =
      Endpoint.builder("pod-a", "10.0.0.7", 8000)
          .role(Endpoint.Role.PREFILL)
          .labels(Map.of("g", "1"))
          .build();
  private final Endpoint podV6 =
      Endpoint.builder("pod-v6", "fd00::7", 8000).role(Endpoint.Role.PREFILL).build();

  private PrefillTargetAllowlist allow() {
    return PrefillTargetAllowlist.builder()
        .endpoint(podA)
        .endpoint(podV6)
        .allowHost("Pod-B.Pool.svc.")
        .listener(listener, "nixl")
        .build();
  }

  @Test
  void knownEndpointResolvesToItselfWithOrWithoutScheme() {
    PrefillTargetAllowlist a = allow();
    assertThat(a.check("10.0.0.7:8000")).isSameAs(podA);
    assertThat(a.check("http://10.0.0.7:8000")).isSameAs(podA);
    assertThat(a.check(" HTTP://10.0.0.7:8000/ ")).isSameAs(podA);
    assertThat(a.check("[fd00::7]:8000")).isSameAs(podV6);
    assertThat(a.check("[FD00::7]:8000")).isSameAs(podV6);
    assertThat(a.check("[fd00:0:0::0:7]:8000")).isSameAs(podV6);
    assertThat(events).isEmpty();
  }

  @Test
  void allowedHostAcceptsAnyPort() {
    Endpoint e = allow().check("pod-b.pool.svc:9001");
    assertThat(e.host()).isEqualTo("pod-b.pool.svc");
    assertThat(e.port()).isEqualTo(9001);
    assertThat(e.id()).isEqualTo("pod-b.pool.svc:9001");
    assertThat(e.role()).isEqualTo(Endpoint.Role.PREFILL);
    assertThat(allow().check("https://pod-b.pool.svc:9443").scheme()).isEqualTo("https");
  }

  @Test
  void unknownTargetsAreForbiddenAndCounted() {
    PrefillTargetAllowlist a = allow();
    for (String bad :
        List.of("10.0.0.7:8001", "169.254.169.254:80", "evil.example:80", "http://10.0.0.8:8000")) {
      assertThatThrownBy(() -> a.check(bad))
          .as(bad)
          .isInstanceOf(ForbiddenTargetException.class)
          .hasMessageContaining("not allowed by SSRF protection")
          .satisfies(t -> assertThat(((ForbiddenTargetException) t).httpStatus()).isEqualTo(403));
    }
    assertThat(events).hasSize(4).allMatch(e -> e.equals("nixl:ssrf_blocked"));
  }

  @Test
  void malformedTargetsAreBadRequests() {
    PrefillTargetAllowlist a = allow();
    for (String bad :
        List.of(
            "10.0.0.7",
            "10.0.0.7:",
            "10.0.0.7:0",
            "10.0.0.7:99999",
            "user@10.0.0.7:8000",
            "10.0.0.7:8000/admin",
            "fd00::7:8000",
            "[fd00::7]",
            "ftp://10.0.0.7:8000",
            ":8000",
            "10.0.0.7:80\r\nx: y")) {
      assertThatThrownBy(() -> a.check(bad))
          .as(bad)
          .isInstanceOf(InvalidRequestException.class)
          .hasMessageContaining("x-prefiller-host-port must be host:port")
          .satisfies(
              t -> assertThat(((InvalidRequestException) t).getMessage()).doesNotContain("\r"));
    }
    assertThat(events).isEmpty();
  }

  @Test
  void headersAreReadCaseInsensitivelyFirstValueWins() {
    PrefillTargetAllowlist a = allow();
    assertThat(a.prefillTarget(Map.of())).isEmpty();
    assertThat(a.prefillTarget(Map.of("X-Prefiller-Host-Port", List.of("10.0.0.7:8000, evil:1"))))
        .contains(podA);
    assertThat(a.prefillTarget(Map.of("x-prefiller-url", List.of("http://10.0.0.7:8000"))))
        .contains(podA);
    assertThatThrownBy(
            () ->
                a.prefillTarget(
                    Map.of("x-prefiller-host-port", List.of("evil:1", "10.0.0.7:8000"))))
        .isInstanceOf(ForbiddenTargetException.class);
  }

  @Test
  void updateReplacesEndpointsButKeepsHosts() {
    PrefillTargetAllowlist a = allow();
    Endpoint podC = Endpoint.of("http://10.0.0.9:8000", Endpoint.Role.PREFILL);
    a.update(List.of(podC));
    assertThat(a.allows("10.0.0.9", 8000)).isTrue();
    assertThat(a.allows("10.0.0.7", 8000)).isFalse();
    assertThat(a.allows("pod-b.pool.svc", 1)).isTrue();
    assertThatThrownBy(() -> a.check("10.0.0.7:8000")).isInstanceOf(ForbiddenTargetException.class);
  }

  @Test
  void emptyAllowlistRefusesEverything() {
    PrefillTargetAllowlist a = PrefillTargetAllowlist.builder().build();
    assertThatThrownBy(() -> a.check("127.0.0.1:8000"))
        .isInstanceOf(ForbiddenTargetException.class);
    assertThatThrownBy(() -> PrefillTargetAllowlist.builder().allowHost(" "))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
