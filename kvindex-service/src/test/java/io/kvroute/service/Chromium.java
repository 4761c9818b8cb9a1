package io.kvroute.service;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.WebSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;

/**
 * A headless Chromium driven over the Chrome DevTools Protocol on the JDK's WebSocket (no
 * Selenium): navigate, evaluate JavaScript, type text and click with real input events. Shipped in
 * this module's test-jar for other modules' page tests.
 */
public final class Chromium implements AutoCloseable {
  /** Where the browser is expected. */
  public static final Path BINARY = Path.of("/usr/bin/chromium");

  private static final ObjectMapper JSON = new ObjectMapper();

  private final Process process;
  private final Path profile;
  private final WebSocket socket;
  private final AtomicInteger ids = new AtomicInteger();
  private final Map<Integer, CompletableFuture<JsonNode>> pending = new ConcurrentHashMap<>();
  private final StringBuilder partial = new StringBuilder();

  private Chromium(Process process, Path profile, WebSocket socket) {
    this.process = process;
    this.profile = profile;
    this.socket = socket;
  }

  /** Whether {@link #BINARY} is installed. */
  public static boolean available() {
    return Files.isExecutable(BINARY);
  }

  /** Starts Chromium on about:blank and attaches to its page. */
  public static Chromium launch(Duration timeout) throws Exception {
    Path profile = Files.createTempDirectory("kvservice-chromium");
    List<String> cmd =
        new ArrayList<>(
            List.of(
                BINARY.toString(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--no-default-browser-check",
                "--remote-allow-origins=*",
                "--user-data-dir=" + profile,
                "--remote-debugging-port=0",
                "about:blank"));
    Process p =
        new ProcessBuilder(cmd)
            .redirectErrorStream(true)
            .redirectOutput(profile.resolve("chromium.log").toFile())
            .start();
    long deadline = System.nanoTime() + timeout.toNanos();
    Path portFile = profile.resolve("DevToolsActivePort");
    HttpClient http = HttpClient.newHttpClient();
    String wsUrl = null;
    try {
      while (wsUrl == null) {
        if (System.nanoTime() > deadline || !p.isAlive()) {
          throw new IllegalStateException(
              "chromium did not start: " + Files.readString(profile.resolve("chromium.log")));
        }
        if (Files.exists(portFile)) {
          List<String> lines = Files.readAllLines(portFile);
          if (!lines.isEmpty() && !lines.get(0).isBlank()) {
            String port = lines.get(0).trim();
            HttpResponse<String> r =
                http.send(
                    HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/json/list"))
                        .build(),
                    HttpResponse.BodyHandlers.ofString());
            for (JsonNode t : JSON.readTree(r.body())) {
              if (t.path("type").asText().equals("page")) {
                wsUrl = t.get("webSocketDebuggerUrl").asText();
              }
            }
          }
        }
        if (wsUrl == null) {
          // Waiting on the browser process for a short while is a bounded poll, not a sleep.
          p.waitFor(50, TimeUnit.MILLISECONDS);
        }
      }
      Chromium[] self = new Chromium[1];
      WebSocket ws =
          http.newWebSocketBuilder()
              .buildAsync(
                  URI.create(wsUrl),
                  new WebSocket.Listener() {
                    @Override
                    public CompletionStage<?> onText(WebSocket w, CharSequence data, boolean last) {
                      self[0].onText(data, last);
                      w.request(1);
                      return null;
                    }
                  })
              .get(10, TimeUnit.SECONDS);
      Chromium c = new Chromium(p, profile, ws);
      self[0] = c;
      c.call("Page.enable", Map.of());
      c.call("Runtime.enable", Map.of());
      return c;
    } catch (Exception e) {
      p.destroyForcibly();
      throw e;
    }
  }

  private void onText(CharSequence data, boolean last) {
    partial.append(data);
    if (!last) {
      return;
    }
    String msg = partial.toString();
    partial.setLength(0);
    try {
      JsonNode n = JSON.readTree(msg);
      if (n.has("id")) {
        CompletableFuture<JsonNode> f = pending.remove(n.get("id").asInt());
        if (f != null) {
          if (n.has("error")) {
            f.completeExceptionally(new IllegalStateException("CDP error: " + n.get("error")));
          } else {
            f.complete(n.get("result"));
          }
        }
      }
    } catch (IOException e) {
      pending.values().forEach(f -> f.completeExceptionally(e));
    }
  }

  /** Sends a CDP command and waits for its result. */
  public JsonNode call(String method, Map<String, ?> params) throws Exception {
    int id = ids.incrementAndGet();
    CompletableFuture<JsonNode> f = new CompletableFuture<>();
    pending.put(id, f);
    ObjectNode msg = JSON.createObjectNode();
    msg.put("id", id);
    msg.put("method", method);
    msg.set("params", JSON.valueToTree(params));
    socket.sendText(JSON.writeValueAsString(msg), true).get(10, TimeUnit.SECONDS);
    try {
      return f.get(30, TimeUnit.SECONDS);
    } catch (TimeoutException e) {
      throw new TimeoutException("no answer to " + method);
    }
  }

  /** Navigates and waits until the document has loaded. */
  public void navigate(String url) throws Exception {
    call("Page.navigate", Map.of("url", url));
    waitFor("document.readyState === 'complete' && location.href === " + quote(url), 15);
  }

  /** Evaluates an expression (awaiting promises) and returns its JSON value. */
  public JsonNode eval(String expression) throws Exception {
    JsonNode r =
        call(
            "Runtime.evaluate",
            Map.of("expression", expression, "returnByValue", true, "awaitPromise", true));
    if (r.has("exceptionDetails")) {
      throw new IllegalStateException(
          "JavaScript failed: " + r.get("exceptionDetails").toString() + " in " + expression);
    }
    return r.path("result").path("value");
  }

  /**
   * Waits inside the page (a promise polling every 50 ms) until {@code condition} is truthy;
   * returns the condition's value.
   */
  public JsonNode waitFor(String condition, int seconds) throws Exception {
    String js =
        "new Promise((resolve, reject) => { const end = Date.now() + "
            + seconds * 1000
            + "; const f = () => { let v; try { v = ("
            + condition
            + "); } catch (e) { v = false; } if (v) resolve(v); else if (Date.now() > end)"
            + " reject(new Error('timed out waiting for: ' + "
            + quote(condition)
            + ")); else setTimeout(f, 50); }; f(); })";
    return eval(js);
  }

  /** Focuses an element and types text into it with input events. */
  public void type(String selector, String text) throws Exception {
    eval("document.querySelector(" + quote(selector) + ").focus()");
    call("Input.insertText", Map.of("text", text));
  }

  /** Clicks the centre of an element with real mouse events. */
  public void click(String selector) throws Exception {
    JsonNode r =
        eval(
            "(() => { const e = document.querySelector("
                + quote(selector)
                + "); e.scrollIntoView(); const b = e.getBoundingClientRect();"
                + " return [b.left + b.width / 2, b.top + b.height / 2]; })()");
    double x = r.get(0).asDouble();
    double y = r.get(1).asDouble();
    for (String type : List.of("mousePressed", "mouseReleased")) {
      call(
          "Input.dispatchMouseEvent",
          Map.of("type", type, "x", x, "y", y, "button", "left", "clickCount", 1));
    }
  }

  /** {@code s} as a JavaScript string literal. */
  public static String quote(String s) {
    try {
      return JSON.writeValueAsString(s);
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  /** The browser's log. */
  public String log() {
    try {
      return Files.readString(profile.resolve("chromium.log"), StandardCharsets.UTF_8);
    } catch (IOException e) {
      return "";
    }
  }

  @Override
  public void close() throws IOException {
    try {
      socket.abort();
      process.destroy();
      if (!process.waitFor(10, TimeUnit.SECONDS)) {
        process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      process.destroyForcibly();
    } finally {
      try (Stream<Path> s = Files.walk(profile)) {
        s.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
      }
    }
  }
}
