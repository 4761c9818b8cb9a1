package io.kvroute.scoring;

import io.kvroute.config.ConfigBinder;
import io.kvroute.config.ConfigException;
import io.kvroute.scoring.internal.EndpointPickerConfig;
import io.kvroute.scoring.internal.EndpointPickerConfig.PluginRef;
import io.kvroute.scoring.internal.EndpointPickerConfig.SchedulingProfile;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.ServiceLoader;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Loads a scheduler configuration from a YAML or JSON document shaped like llm-d's {@code
 * EndpointPickerConfig}: {@code plugins} (instances with {@code name}, {@code type}, {@code
 * parameters}) and {@code schedulingProfiles} (each a list of {@code pluginRef}s, scorers with an
 * optional {@code weight}, default 1). The result is a {@link Scheduler.Builder}, so code can still
 * add the index, metrics registry, clock and so on.
 *
 * <p>Plugin types are {@link SchedulerPluginProvider}s, found with {@link ServiceLoader} (kvroute's
 * own are registered that way too) or registered with {@link Builder#plugin}; a user's jar adds
 * types that configurations then name. As upstream: with no {@code schedulingProfiles}, one {@code
 * default} profile holds every filter, scorer and picker in listing order; a profile without a
 * picker gets {@code max-score-picker}; a plugin's name defaults to its type; a configuration with
 * several profiles needs a profile handler. {@code docs/configuration.md} lists every key and every
 * built-in plugin's parameters.
 *
 * <p>The document is bound strictly ({@link ConfigBinder}): unknown keys and parameters, duplicate
 * keys, wrong types and unknown plugin types are {@link SchedulerConfigException}s naming the
 * field, e.g. {@code plugins[2].type: unknown plugin "foo"; known: ...}. llm-d parameters that have
 * no meaning here (such as the precise scorer's {@code kvEventsConfig}) are accepted and ignored.
 *
 * <p>Instances are immutable and thread-safe.
 */
public final class SchedulerConfigLoader {
  private static final ConfigBinder BINDER = ConfigBinder.create();
  private static final Pattern FACTORY_MESSAGE =
      Pattern.compile("([A-Za-z][A-Za-z0-9_.\\[\\]]*) (must .*|is .*)");

  private final Predicate<String> isDown;
  private final Map<String, SchedulerPluginProvider<?>> providers;

  private SchedulerConfigLoader(
      Predicate<String> isDown, Map<String, SchedulerPluginProvider<?>> providers) {
    this.isDown = isDown;
    this.providers = providers;
  }

  /** A loader with the plugins found on the class path, whose health filters see no breakers. */
  public static SchedulerConfigLoader create() {
    return builder().build();
  }

  /**
   * A loader whose {@code health-filter}s also drop endpoints for which {@code isDown} is true
   * (circuit breakers of the connector layer, a {@link HealthProbe}, ...).
   */
  public static SchedulerConfigLoader create(Predicate<String> isDown) {
    return builder().isDown(isDown).build();
  }

  /** A builder: plugin discovery, explicit plugins and external health. */
  public static Builder builder() {
    return new Builder();
  }

  /** Every plugin type this loader knows, sorted. */
  public Set<String> knownTypes() {
    return providers.keySet();
  }

  /** The provider of a plugin type, if known (for tooling and documentation). */
  public java.util.Optional<SchedulerPluginProvider<?>> provider(String type) {
    return java.util.Optional.ofNullable(providers.get(type));
  }

  /**
   * Loads a file (YAML, or JSON); errors name the file.
   *
   * @throws SchedulerConfigException when the file cannot be read or is invalid
   */
  public Scheduler.Builder load(Path file) {
    return build(() -> BINDER.read(file, EndpointPickerConfig.class), "", file.toString());
  }

  /**
   * Loads a document.
   *
   * @throws SchedulerConfigException when the document is malformed or invalid
   */
  public Scheduler.Builder load(String document) {
    return build(() -> BINDER.readYaml(document, EndpointPickerConfig.class), "", "");
  }

  /**
   * Loads a configuration already read as a tree (for example the {@code scheduler:} mapping of a
   * gateway configuration); errors are reported under {@code path}.
   *
   * @throws SchedulerConfigException when the configuration is invalid
   */
  public Scheduler.Builder load(Map<String, ?> tree, String path) {
    Objects.requireNonNull(tree, "tree");
    return build(() -> BINDER.convert(tree, EndpointPickerConfig.class, path), path, "");
  }

  private interface Reader {
    EndpointPickerConfig read();
  }

  private Scheduler.Builder build(Reader reader, String prefix, String source) {
    try {
      return build(reader.read(), prefix);
    } catch (SchedulerConfigException e) {
      throw e;
    } catch (ConfigException e) {
      throw new SchedulerConfigException(
          source.isEmpty() ? e.source() : source, e.path(), e.problem(), e);
    }
  }

  /** A created instance and where it was declared. */
  private record Instance(String name, String type, String path, SchedulerPlugin plugin) {
    SchedulerPlugin.Kind kind() {
      return plugin.kind();
    }
  }

  private Scheduler.Builder build(EndpointPickerConfig config, String prefix) {
    Scheduler.Builder builder = Scheduler.builder();
    Map<String, Instance> instances = new LinkedHashMap<>();
    for (int i = 0; i < config.plugins().size(); i++) {
      EndpointPickerConfig.Plugin spec = config.plugins().get(i);
      String at = ConfigException.join(prefix, "plugins[" + i + "]");
      SchedulerPluginProvider<?> provider = providers.get(spec.type());
      if (provider == null) {
        throw ConfigException.unknown(at + ".type", "plugin", spec.type(), knownTypes());
      }
      SchedulerPlugin plugin = create(provider, spec, at + ".parameters");
      plugin.applySettings(builder);
      instances.put(spec.name(), new Instance(spec.name(), spec.type(), at, plugin));
    }

    List<Profile> profiles = new ArrayList<>();
    if (config.schedulingProfiles() == null) {
      Profile.Builder pb = Profile.builder("default");
      instances.values().forEach(inst -> add(pb, inst, null));
      profiles.add(pb.build());
    } else {
      for (int j = 0; j < config.schedulingProfiles().size(); j++) {
        profiles.add(
            profile(
                config.schedulingProfiles().get(j),
                ConfigException.join(prefix, "schedulingProfiles[" + j + "]"),
                instances));
      }
    }
    profiles.forEach(builder::profile);
    handler(instances, profiles, prefix).applyTo(builder);
    return builder;
  }

  private <P> SchedulerPlugin create(
      SchedulerPluginProvider<P> provider, EndpointPickerConfig.Plugin spec, String at) {
    P params = BINDER.convert(spec.parameters(), provider.parametersType(), at);
    SchedulerPluginProvider.Context context =
        new SchedulerPluginProvider.Context(spec.name(), isDown, at);
    try {
      return Objects.requireNonNull(
          provider.create(params, context), provider.type() + " created no plugin");
    } catch (ConfigException e) {
      throw e.path().startsWith(at) ? e : e.under(at);
    } catch (IllegalArgumentException e) {
      // The factories name fields "<plugin>.<field> must ...": report them at the parameter.
      String m = String.valueOf(e.getMessage());
      if (m.startsWith(spec.name() + ".")) {
        m = m.substring(spec.name().length() + 1);
      }
      Matcher f = FACTORY_MESSAGE.matcher(m);
      if (f.matches()) {
        throw new ConfigException(ConfigException.join(at, f.group(1)), f.group(2), e);
      }
      throw new ConfigException(at, m, e);
    }
  }

  private static Profile profile(
      SchedulingProfile spec, String at, Map<String, Instance> instances) {
    Profile.Builder pb = Profile.builder(spec.name());
    Instance picker = null;
    for (int k = 0; k < spec.plugins().size(); k++) {
      PluginRef ref = spec.plugins().get(k);
      String refAt = at + ".plugins[" + k + "]";
      Instance inst = instances.get(ref.pluginRef());
      if (inst == null) {
        throw ConfigException.unknown(
            refAt + ".pluginRef", "plugin name", ref.pluginRef(), instances.keySet());
      }
      switch (inst.kind()) {
        case FILTER, SCORER -> {}
        case PICKER -> {
          if (picker != null) {
            throw new ConfigException(
                refAt + ".pluginRef",
                "a profile has at most one picker; \""
                    + picker.name()
                    + "\" is already this profile's");
          }
          picker = inst;
        }
        default ->
            throw new ConfigException(
                refAt + ".pluginRef",
                "\""
                    + inst.name()
                    + "\" is a "
                    + describe(inst.kind())
                    + ", not a filter, scorer or picker, so it cannot be in a profile");
      }
      if (ref.weight() != null && inst.kind() != SchedulerPlugin.Kind.SCORER) {
        throw new ConfigException(
            refAt + ".weight",
            "only scorers take a weight; \"" + inst.name() + "\" is a " + describe(inst.kind()));
      }
      add(pb, inst, ref.weight());
    }
    try {
      return pb.build();
    } catch (IllegalArgumentException e) {
      throw new ConfigException(at, String.valueOf(e.getMessage()), e);
    }
  }

  private static String describe(SchedulerPlugin.Kind kind) {
    return switch (kind) {
      case FILTER -> "filter";
      case SCORER -> "scorer";
      case PICKER -> "picker";
      case PD_DECIDER -> "PD decider";
      case PROFILE_HANDLER -> "profile handler";
      case DATA_PRODUCER -> "data producer";
    };
  }

  private static void add(Profile.Builder pb, Instance inst, Double weight) {
    switch (inst.kind()) {
      case FILTER -> pb.filter((Filter) inst.plugin().instance());
      case SCORER -> pb.scorer((Scorer) inst.plugin().instance(), weight == null ? 1.0 : weight);
      case PICKER -> pb.picker((Picker) inst.plugin().instance());
      default -> {} // deciders, handlers and producers are not profile members
    }
  }

  private ProfileHandler.Setup handler(
      Map<String, Instance> instances, List<Profile> profiles, String prefix) {
    Instance handler = null;
    Map<String, PdDecider> deciders = new LinkedHashMap<>();
    for (Instance inst : instances.values()) {
      if (inst.kind() == SchedulerPlugin.Kind.PD_DECIDER) {
        deciders.put(inst.name(), (PdDecider) inst.plugin().instance());
      } else if (inst.kind() == SchedulerPlugin.Kind.PROFILE_HANDLER) {
        if (handler != null) {
          throw new ConfigException(
              inst.path() + ".type",
              "only one profile handler is allowed; \""
                  + handler.name()
                  + "\" is another ("
                  + handler.path()
                  + ")");
        }
        handler = inst;
      }
    }
    List<String> names = profiles.stream().map(Profile::name).toList();
    String at = handler == null ? prefix : handler.path() + ".parameters";
    ProfileHandler.Setup setup =
        new ProfileHandler.Setup(
            names,
            deciders,
            new SchedulerPluginProvider.Context(handler == null ? "" : handler.name(), isDown, at));
    if (handler == null) {
      if (profiles.size() > 1) {
        throw new ConfigException(
            ConfigException.join(prefix, "schedulingProfiles"),
            "has "
                + profiles.size()
                + " profiles but no profile handler plugin (disagg-profile-handler or"
                + " single-profile-handler) says which runs");
      }
      return setup;
    }
    ((ProfileHandler) handler.plugin().instance()).configure(setup);
    return setup;
  }

  /** Builds {@link SchedulerConfigLoader}s. Not thread-safe. */
  public static final class Builder {
    private Predicate<String> isDown = id -> false;
    private ClassLoader classLoader;
    private boolean discover = true;
    private final Map<String, SchedulerPluginProvider<?>> explicit = new LinkedHashMap<>();

    private Builder() {}

    /**
     * External health for {@code health-filter}s: endpoints for which it is true are dropped
     * (circuit breakers, a {@link HealthProbe}); evaluated on every pick.
     */
    public Builder isDown(Predicate<String> isDown) {
      this.isDown = Objects.requireNonNull(isDown, "isDown");
      return this;
    }

    /**
     * The class loader providers are discovered with (default: the thread's context class loader,
     * or this class's).
     */
    public Builder classLoader(ClassLoader classLoader) {
      this.classLoader = Objects.requireNonNull(classLoader, "classLoader");
      return this;
    }

    /** Whether to discover providers with {@link ServiceLoader} (default true). */
    public Builder discover(boolean discover) {
      this.discover = discover;
      return this;
    }

    /**
     * Registers a provider explicitly; it takes precedence over a discovered one of the same type.
     *
     * @throws IllegalArgumentException when another explicit provider has the same type
     */
    public Builder plugin(SchedulerPluginProvider<?> provider) {
      Objects.requireNonNull(provider, "provider");
      SchedulerPluginProvider<?> old = explicit.putIfAbsent(provider.type(), provider);
      if (old != null) {
        throw new IllegalArgumentException(
            "two scheduler plugins of type \"" + provider.type() + "\" are registered");
      }
      return this;
    }

    /**
     * Builds the loader.
     *
     * @throws IllegalStateException when two discovered providers declare the same type
     */
    public SchedulerConfigLoader build() {
      Map<String, SchedulerPluginProvider<?>> all = new TreeMap<>();
      if (discover) {
        ClassLoader cl = classLoader;
        if (cl == null) {
          cl = Thread.currentThread().getContextClassLoader();
        }
        if (cl == null) {
          cl = SchedulerConfigLoader.class.getClassLoader();
        }
        for (SchedulerPluginProvider<?> p : ServiceLoader.load(SchedulerPluginProvider.class, cl)) {
          SchedulerPluginProvider<?> old = all.putIfAbsent(p.type(), p);
          if (old != null && old.getClass() != p.getClass()) {
            throw new IllegalStateException(
                "two scheduler plugin providers declare type \""
                    + p.type()
                    + "\": "
                    + old.getClass().getName()
                    + " and "
                    + p.getClass().getName());
          }
        }
      }
      all.putAll(explicit);
      return new SchedulerConfigLoader(isDown, java.util.Collections.unmodifiableMap(all));
    }
  }
}
