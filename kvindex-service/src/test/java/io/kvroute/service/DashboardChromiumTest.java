package io.kvroute.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvroute.service.ServiceConfig.PodSpec;
import io.kvroute.testkit.VllmSimulator;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * The dashboard in a real headless Chromium (driven over the DevTools protocol) against {@code
 * serve} following simulated vLLM pods: live numbers change while traffic runs, and a pasted prompt
 * is scored per pod. Skipped when {@code /usr/bin/chromium} is absent.
 */
class DashboardChromiumTest {

  static String events(String pod) {
    return "Number((document.querySelector('#pods tr[data-pod=\""
        + pod
        + "\"] td.events') || {})"
        + ".textContent?.replace(/,/g, '') || 0)";
  }

  @Test
  void dashboardShowsLiveNumbersAndScoresAPastedPrompt() throws Exception {
    assumeTrue(
        Chromium.available(),
        "/usr/bin/chromium is absent: apt-get install -y chromium chromium-driver to run this test");
    List<VllmSimulator> sims = new ArrayList<>();
    AtomicBoolean running = new AtomicBoolean(true);
    AtomicReference<Throwable> trafficError = new AtomicReference<>();
    Thread traffic = null;
    try {
      ServiceConfig.Builder cb =
          ServiceConfig.builder()
              .model(ServeEndToEndTest.MODEL)
              .port(0)
              .threads(2)
              .tokenizer(ServiceConfig.TokenizerSettings.builder().fromPods().build());
      for (int i = 0; i < 2; i++) {
        VllmSimulator s = ServeEndToEndTest.sim("pod-" + i);
        sims.add(s);
        cb.pod(
            new PodSpec(
                s.name(),
                s.eventsEndpoint(),
                Optional.of(s.replayEndpoint()),
                Optional.of(s.baseUrl()),
                2048));
      }
      try (KvIndexService service = KvIndexService.start(cb.build());
          Chromium browser = Chromium.launch(Duration.ofSeconds(30))) {
        KvIndexClient client = KvIndexClient.builder(service.baseUri()).build();
        String pasted = ServeEndToEndTest.serveUntilSeen(client, sims.get(1), "pasted prompt");
        // a prompt no pod holds: a score query with nothing available
        client.score(
            ScoreRequest.builder().prompt(ServeEndToEndTest.prompt("never served")).build());

        traffic =
            new Thread(
                () -> {
                  try {
                    for (int i = 0; running.get(); i++) {
                      ServeEndToEndTest.complete(
                          sims.get(0), ServeEndToEndTest.prompt(i + " live traffic"));
                    }
                  } catch (Exception e) {
                    trafficError.set(e);
                  }
                },
                "dashboard-traffic");
        traffic.setDaemon(true);
        traffic.start();

        browser.navigate(service.baseUri() + "/");
        browser.waitFor("document.querySelector('#pods tr[data-pod=\"pod-0\"]')", 15);
        long first = browser.waitFor(events("pod-0"), 15).asLong();
        long totalFirst =
            browser
                .eval(
                    "Number(document.getElementById('events-total').textContent"
                        + ".replace(/,/g, ''))")
                .asLong();
        JsonNode later =
            browser.waitFor(
                "(() => { const v = "
                    + events("pod-0")
                    + "; return v > "
                    + first
                    + " ? v : 0; })()",
                20);
        assertThat(later.asLong()).isGreaterThan(first);
        JsonNode total =
            browser.waitFor(
                "(() => { const v = Number(document.getElementById('events-total')"
                    + ".textContent.replace(/,/g, '')); return v > "
                    + totalFirst
                    + " ? v : 0; })()",
                20);
        assertThat(total.asLong()).isGreaterThan(totalFirst);
        assertThat(
                browser
                    .waitFor(
                        "(() => { const t = document.querySelector('#pods tr[data-pod=\"pod-0\"] td.gpu');"
                            + " return t && Number(t.textContent.replace(/,/g, '')) > 0 ? t.textContent"
                            + " : ''; })()",
                        20)
                    .asText())
            .isNotEmpty();
        assertThat(
                browser
                    .eval(
                        "document.querySelector('#pods tr[data-pod=\"pod-0\"] td.eps')"
                            + ".textContent")
                    .asText())
            .matches("\\d+\\.\\d");

        browser.type("#prompt", pasted);
        browser.click("#score-button");
        browser.waitFor("document.body.dataset.scoring === 'done'", 20);
        assertThat(browser.eval("document.querySelector('#scores tr.best').dataset.pod").asText())
            .isEqualTo("pod-1");
        assertThat(
                browser
                    .eval(
                        "document.querySelector('#scores tr[data-pod=\"pod-1\"] td.score').textContent")
                    .asText())
            .isEqualTo("100.00");
        assertThat(
                browser
                    .eval(
                        "document.querySelector('#scores tr[data-pod=\"pod-0\"] td.present').textContent")
                    .asText())
            .isEqualTo("0");
        assertThat(browser.eval("document.getElementById('score-summary').textContent").asText())
            .contains("recommendation: pod-1");
        // the pasted prompt's reuse split as the service knows it: pod-1 holds every full block,
        // so all of it is available and the recommendation holds all of it
        String summary =
            browser.eval("document.getElementById('score-summary').textContent").asText();
        long blocksTotal =
            browser
                .eval(
                    "Number(document.querySelector('#scores tr[data-pod=\"pod-1\"] td.total')"
                        + ".textContent.replace(/,/g, ''))")
                .asLong();
        assertThat(blocksTotal).isPositive();
        assertThat(summary)
            .contains("reuse: available " + blocksTotal + " blocks")
            .contains("on pod-1")
            .contains("recommended pod holds " + blocksTotal + " blocks");

        // the running totals: the dashboard shows what GET /api/v1/reuse says once it caught up
        // with the last query (the browser's own); no query is sent after it
        JsonNode reuse =
            new com.fasterxml.jackson.databind.ObjectMapper()
                .readTree(
                    java.net.http.HttpClient.newHttpClient()
                        .send(
                            java.net.http.HttpRequest.newBuilder(
                                    java.net.URI.create(service.baseUri() + "/api/v1/reuse"))
                                .build(),
                            java.net.http.HttpResponse.BodyHandlers.ofString())
                        .body());
        long queries = reuse.get("queries").asLong();
        assertThat(queries).isGreaterThanOrEqualTo(3);
        assertThat(reuse.get("delivered_blocks").isNull()).isTrue();
        assertThat(reuse.get("misses").get("none_available").asLong()).isPositive();
        long available = reuse.get("available_blocks").asLong();
        long prompt = reuse.get("prompt_blocks").asLong();
        assertThat(available)
            .isGreaterThanOrEqualTo(reuse.get("recommended_blocks").asLong())
            .isGreaterThanOrEqualTo(blocksTotal)
            .isLessThan(prompt);
        browser.waitFor(
            "Number(document.getElementById('reuse-queries').textContent.replace(/,/g, '')) === "
                + queries,
            20);
        String shown =
            browser.eval("document.getElementById('reuse-available').textContent").asText();
        assertThat(shown).endsWith(" %");
        assertThat(Double.parseDouble(shown.substring(0, shown.length() - 2)))
            .isCloseTo(100.0 * available / prompt, org.assertj.core.api.Assertions.within(0.051));
        assertThat(browser.eval("document.getElementById('reuse-none').textContent").asText())
            .isEqualTo(Long.toString(reuse.get("misses").get("none_available").asLong()));
        assertThat(browser.eval("document.getElementById('reuse-delivered').textContent").asText())
            .isEqualTo("not known here");
      }
    } finally {
      running.set(false);
      if (traffic != null) {
        traffic.join(10_000);
      }
      sims.forEach(VllmSimulator::close);
    }
    assertThat(trafficError.get()).isNull();
  }
}
