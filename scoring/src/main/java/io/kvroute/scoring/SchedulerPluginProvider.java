package io.kvroute.scoring;

import io.kvroute.config.ConfigException;
import java.util.Objects;
import java.util.function.BiFunction;
import java.util.function.Predicate;

/**
 * A scheduler plugin type that an {@code EndpointPickerConfig} names in {@code plugins[].type}: a
 * filter, scorer, picker, PD decider, profile handler or data producer, as llm-d's plugin registry
 * has them. {@link SchedulerConfigLoader} finds providers with {@link java.util.ServiceLoader}
 * (list the class in {@code META-INF/services/io.kvroute.scoring.SchedulerPluginProvider}, or
 * {@code provides} it in a module), or takes them explicitly ({@link
 * SchedulerConfigLoader.Builder#plugin}). kvroute's own plugins are registered the same way.
 *
 * <pre>{@code
 * public final class ZoneFilterProvider implements SchedulerPluginProvider<ZoneFilterProvider.Params> {
 *   public record Params(String zone) {
 *     public Params {
 *       if (zone == null) throw new ConfigException("zone", "is required");
 *     }
 *   }
 *   public String type() { return "zone-filter"; }
 *   public Class<Params> parametersType() { return Params.class; }
 *   public SchedulerPlugin create(Params p, Context context) {
 *     return SchedulerPlugin.filter(
 *         Filters.simple(context.name(), e -> p.zone().equals(e.labels().get("zone"))));
 *   }
 * }
 * }</pre>
 *
 * <p>The {@code parameters:} mapping is bound to {@link #parametersType()} with kvroute's strict
 * binder ({@link io.kvroute.config.ConfigBinder}): a record (unknown keys are errors; validate in
 * the compact constructor, throwing {@link ConfigException} with the parameter's name), {@link
 * NoParameters} for a plugin without any, or {@code Map} for the raw tree of maps, lists and
 * scalars. Implementations must be thread-safe and have a public no-argument constructor when found
 * with {@code ServiceLoader}.
 *
 * @param <P> the type the plugin's parameters are bound to
 */
public interface SchedulerPluginProvider<P> {

  /** The type name used in configurations, e.g. {@code queue-scorer}. */
  String type();

  /** The record (or {@code Map}) that {@code parameters:} is bound to. */
  Class<P> parametersType();

  /**
   * Creates one plugin instance.
   *
   * @param parameters the bound parameters (defaults applied by the record)
   * @param context the instance's name and services
   * @throws ConfigException (path relative to {@code parameters}) or {@link
   *     IllegalArgumentException} when the parameters are invalid
   */
  SchedulerPlugin create(P parameters, Context context);

  /**
   * A provider made of its parts, for explicit registration ({@link
   * SchedulerConfigLoader.Builder#plugin}).
   */
  static <P> SchedulerPluginProvider<P> of(
      String type, Class<P> parametersType, BiFunction<P, Context, SchedulerPlugin> factory) {
    Objects.requireNonNull(type, "type");
    Objects.requireNonNull(parametersType, "parametersType");
    Objects.requireNonNull(factory, "factory");
    return new SchedulerPluginProvider<>() {
      @Override
      public String type() {
        return type;
      }

      @Override
      public Class<P> parametersType() {
        return parametersType;
      }

      @Override
      public SchedulerPlugin create(P parameters, Context context) {
        return factory.apply(parameters, context);
      }
    };
  }

  /** The parameters of a plugin that takes none: any key under {@code parameters:} is an error. */
  record NoParameters() {}

  /** What a plugin instance is created with. Immutable. */
  final class Context {
    private final String name;
    private final Predicate<String> isDown;
    private final String path;

    Context(String name, Predicate<String> isDown, String path) {
      this.name = name;
      this.isDown = isDown;
      this.path = path;
    }

    /** The instance's name ({@code plugins[].name}, or its type when not given). */
    public String name() {
      return name;
    }

    /**
     * External health for health-style filters: true for endpoints to drop (circuit breakers of the
     * connector layer, a {@link HealthProbe}); see {@link SchedulerConfigLoader#create(
     * Predicate)}.
     */
    public Predicate<String> isDown() {
      return isDown;
    }

    /**
     * An error naming one of this plugin's parameters, e.g. {@code invalid("profiles.decode",
     * "\"x\" is not a profile")} is reported at {@code plugins[3].parameters.profiles.decode}.
     */
    public ConfigException invalid(String parameter, String problem) {
      return new ConfigException(ConfigException.join(path, parameter), problem);
    }
  }
}
