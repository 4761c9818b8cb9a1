package com.example.kvconnector;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.config.ConfigException;
import io.kvroute.connector.KVConnectorProvider;
import io.kvroute.connector.http.AbstractHttpConnector;
import io.kvroute.connector.http.HttpParameters;
import io.kvroute.connector.http.OpenAiJson;
import io.kvroute.connector.http.TypedConnectorProvider;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * The {@code keyed-store} connector, for engines that share KV through a store addressed by a key
 * the gateway chooses: the prefill leg is told to put the prompt's KV under the key ({@code
 * kv_transfer_params: {store_key, action: "put"}}), the decode leg to get it from there ({@code
 * action: "get"}). Without a prefill endpoint the request goes to decode alone.
 *
 * <p>Thread-safe and stateless per request.
 */
public final class KeyedStoreConnector extends AbstractHttpConnector {

  /** The type configurations name: {@code kvConnector: {type: keyed-store}}. */
  public static final String TYPE = "keyed-store";

  /**
   * The {@code config:} block, bound by kvroute's configuration binder: an unknown or misspelt key
   * is refused with the closest known one, a bad value names its key.
   *
   * @param keyPrefix the prefix of every store key (default {@code kv-})
   * @param maxPrefillResponseBytes the largest prefill answer read (default 4 MiB)
   */
  public record Parameters(String keyPrefix, Integer maxPrefillResponseBytes) {
    /** Fills in the defaults and checks the values. */
    public Parameters {
      keyPrefix = keyPrefix == null ? "kv-" : keyPrefix;
      if (keyPrefix.isBlank()) {
        throw new ConfigException("keyPrefix", "must not be blank");
      }
      HttpParameters http = HttpParameters.of(maxPrefillResponseBytes);
      maxPrefillResponseBytes = http.maxPrefillResponseBytes();
    }

    HttpParameters http() {
      return HttpParameters.of(maxPrefillResponseBytes);
    }
  }

  private final String keyPrefix;

  /** A connector in {@code context} with its bound {@code parameters}. */
  public KeyedStoreConnector(KVConnectorProvider.Context context, Parameters parameters) {
    super(context, parameters.http());
    this.keyPrefix = parameters.keyPrefix();
  }

  @Override
  public String type() {
    return TYPE;
  }

  /**
   * Runs the prefill leg (one token, not streamed, told to put the KV under the key), then returns
   * the decode leg (the client's body, told to get it). {@code proxy} sends that decode leg and
   * streams its answer back; a gateway with its own HTTP client sends it itself.
   */
  @Override
  public CompletableFuture<DecodeRequest> prepareDecode(PdRequest pd) {
    return prepareDisaggregated(
        pd,
        body -> {
          String key = keyPrefix + pd.request().requestId();
          ObjectNode put = OpenAiJson.objectNode().put("store_key", key).put("action", "put");
          return afterPrefill(
              pd,
              OpenAiJson.oneTokenPrefill(body, put),
              prefillAnswer -> {
                body.set(
                    "kv_transfer_params",
                    OpenAiJson.objectNode().put("store_key", key).put("action", "get"));
                return decodeRequest(pd, body, Map.of("mode", "prefill_decode"));
              });
        });
  }

  /** Found by {@link java.util.ServiceLoader} through {@code META-INF/services}. */
  public static final class Provider extends TypedConnectorProvider<Parameters> {
    /** For ServiceLoader: a public no-argument constructor. */
    public Provider() {
      super(
          TYPE,
          "prefill puts the KV in a shared store under a key, decode gets it",
          Parameters.class,
          KeyedStoreConnector::new);
    }
  }
}
