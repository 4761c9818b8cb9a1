package io.kvroute.connector;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.ServiceLoader;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * A registry of {@link KVConnectorProvider}s keyed by {@link KVConnectorProvider#type()}.
 *
 * <p>Immutable and thread-safe. Build one explicitly, or discover the providers on a class path:
 *
 * <pre>{@code
 * KVConnectors connectors = KVConnectors.builder()
 *     .discover(Thread.currentThread().getContextClassLoader())
 *     .register(new MyConnectorProvider())   // explicit registration wins over discovery
 *     .build();
 * KVConnector nixl = connectors.create(context);
 * }</pre>
 */
public final class KVConnectors {
  private final Map<String, KVConnectorProvider> providers;

  private KVConnectors(Map<String, KVConnectorProvider> providers) {
    this.providers = Collections.unmodifiableMap(new TreeMap<>(providers));
  }

  /** All providers found by {@link ServiceLoader} on {@code classLoader}. */
  public static KVConnectors discover(ClassLoader classLoader) {
    return builder().discover(classLoader).build();
  }

  /** A builder with no providers. */
  public static Builder builder() {
    return new Builder();
  }

  /** The registered type names, sorted. */
  public java.util.Set<String> types() {
    return Collections.unmodifiableSet(new TreeSet<>(providers.keySet()));
  }

  /**
   * The provider of {@code type} (case-insensitive).
   *
   * @throws ConnectorException.UnknownConnectorException listing the known types
   */
  public KVConnectorProvider provider(String type) {
    Objects.requireNonNull(type, "type");
    KVConnectorProvider p = providers.get(type.toLowerCase(Locale.ROOT));
    if (p == null) {
      throw new ConnectorException.UnknownConnectorException(
          "no KVConnector of type \""
              + type
              + "\"; known: "
              + (providers.isEmpty() ? "(none)" : String.join(", ", providers.keySet()))
              + ". Add the connector's jar to the class path or register its provider.");
    }
    return p;
  }

  /** Creates a connector of {@code context.config().type()}. */
  public KVConnector create(KVConnectorProvider.Context context) {
    return provider(context.config().type()).create(context);
  }

  /** Builds a {@link KVConnectors}; not thread-safe. */
  public static final class Builder {
    private final Map<String, KVConnectorProvider> discovered = new LinkedHashMap<>();
    private final Map<String, KVConnectorProvider> explicit = new LinkedHashMap<>();

    private Builder() {}

    /**
     * Adds every provider {@link ServiceLoader} finds on {@code classLoader}. A provider that fails
     * to load is a configuration error and is thrown.
     */
    public Builder discover(ClassLoader classLoader) {
      for (KVConnectorProvider p : ServiceLoader.load(KVConnectorProvider.class, classLoader)) {
        discovered.put(checkType(p), p);
      }
      return this;
    }

    /** Registers a provider; it replaces a discovered provider of the same type. */
    public Builder register(KVConnectorProvider provider) {
      Objects.requireNonNull(provider, "provider");
      String type = checkType(provider);
      if (explicit.containsKey(type)) {
        throw new IllegalArgumentException(
            "two providers registered for connector type \"" + type + "\"");
      }
      explicit.put(type, provider);
      return this;
    }

    private static String checkType(KVConnectorProvider p) {
      String t = p.type();
      if (t == null || t.isBlank() || !t.equals(t.toLowerCase(Locale.ROOT))) {
        throw new IllegalArgumentException(
            p.getClass().getName() + ".type() must be a non-blank lower-case name, was " + t);
      }
      return t;
    }

    /** The registry. */
    public KVConnectors build() {
      Map<String, KVConnectorProvider> all = new LinkedHashMap<>(discovered);
      all.putAll(explicit);
      return new KVConnectors(all);
    }
  }
}
