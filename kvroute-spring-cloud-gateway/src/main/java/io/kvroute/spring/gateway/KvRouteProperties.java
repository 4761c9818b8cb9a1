package io.kvroute.spring.gateway;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonUnwrapped;
import io.kvroute.assembly.RouterSettings;
import io.kvroute.config.ConfigException;
import java.util.Locale;
import org.springframework.util.unit.DataSize;

/**
 * The {@code kvroute.*} properties: the filter's own ({@code enabled}, {@code mode}, {@code
 * max-request-size}) and, beside them, kvroute's one settings record ({@link RouterSettings}: the
 * keys of {@code kvroute gateway}'s file, in Spring's kebab case), from which the starter builds
 * its router, index and discovery exactly as the CLI does ({@link
 * io.kvroute.assembly.RouterAssembly}).
 *
 * <pre>{@code
 * kvroute:
 *   mode: relay                       # relay (kvroute runs the request) or route (SCG proxies it)
 *   observability-headers: true       # x-kvroute-* response headers
 *   default-connector: { type: http }
 *   models:
 *     "[Qwen/Qwen3-0.6B]":            # brackets keep the '/' in a map key
 *       kv-connector: { type: nixl, timeouts: { prefill: 30s } }
 *       tokenizer: { path: /models/hub/models--Qwen--Qwen3-0.6B }
 *   index: { block-size: 16 }          # precise prefix scoring from KV events
 *   scheduler: /etc/kvroute/picker.yaml
 *   endpoints:
 *     - { id: p0, url: "http://10.0.0.5:8000", role: prefill }
 *     - id: d0
 *       url: "http://10.0.0.6:8000"
 *       role: decode
 *       kv-events: { publisher: "tcp://10.0.0.6:5557", replay: "tcp://10.0.0.6:5558" }
 *   discovery:                        # with io.kvroute:kvroute-kubernetes on the class path
 *     kubernetes: { namespace: llm, inference-pool: qwen-pool }
 * }</pre>
 *
 * <p>They are bound by kvroute's configuration binder, as strictly as the CLI's file (an unknown
 * key under {@code kvroute.} is an error, with a suggestion), and a wrong value stops the
 * application at start-up with a message naming the property, for example {@code
 * kvroute.endpoints[1].url: not an http(s) URL: "http//x"}. A {@code kv-connector} section is
 * kvroute's own ({@code timeouts.prefill}, {@code retry.maxAttempts}, ...). Immutable.
 *
 * @param enabled whether the starter is active (default true)
 * @param mode what the filter does with a request to an OpenAI path (default {@code relay})
 * @param maxRequestSize the largest request body the filter reads, as a Spring data size; larger
 *     ones are answered 413 (default {@code 16MB})
 * @param settings the router: endpoints, discovery, connectors, scheduler, index, tracing
 */
public record KvRouteProperties(
    Boolean enabled, Mode mode, String maxRequestSize, @JsonUnwrapped RouterSettings settings) {

  /** The properties' prefix. */
  public static final String PREFIX = "kvroute";

  /** What {@link KvRouteGlobalFilter} does with a routed request. */
  public enum Mode {
    /**
     * kvroute runs the request through the model's connector (prefill, then decode, with retries
     * over pairs) and streams the decode response back; the route's own URI is not used.
     */
    RELAY,
    /**
     * kvroute only decides: the route's request URL becomes the chosen decode endpoint and the
     * decision's headers ({@code x-prefiller-host-port} for a decode-side PD sidecar) are added;
     * Spring Cloud Gateway proxies the request.
     */
    ROUTE;

    /**
     * The mode named {@code name}, in any case.
     *
     * @throws IllegalArgumentException naming the modes for another name
     */
    @JsonCreator
    public static Mode of(String name) {
      for (Mode m : values()) {
        if (m.name().equalsIgnoreCase(name)) {
          return m;
        }
      }
      throw new IllegalArgumentException("must be relay or route, was \"" + name + "\"");
    }
  }

  /** Validates and applies the defaults. */
  public KvRouteProperties {
    enabled = enabled == null || enabled;
    mode = mode == null ? Mode.RELAY : mode;
    maxRequestSize = maxRequestSize == null ? "16MB" : maxRequestSize;
    bytes(maxRequestSize);
    settings = settings == null ? RouterSettings.defaults() : settings;
  }

  /** Settings with every default. */
  public static KvRouteProperties defaults() {
    return new KvRouteProperties(null, null, null, null);
  }

  /** {@link #maxRequestSize()} in bytes. */
  public int maxRequestBytes() {
    return bytes(maxRequestSize);
  }

  private static int bytes(String size) {
    DataSize d;
    try {
      d = DataSize.parse(size.trim().toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw new ConfigException("maxRequestSize", "not a data size such as 16MB: \"" + size + "\"");
    }
    if (d.toBytes() < 1 || d.toBytes() >= (1L << 31)) {
      throw new ConfigException("maxRequestSize", "must be in [1B, 2GB), was " + size);
    }
    return (int) d.toBytes();
  }
}
