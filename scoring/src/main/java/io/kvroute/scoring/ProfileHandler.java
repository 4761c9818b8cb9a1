package io.kvroute.scoring;

import io.kvroute.config.ConfigException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Says which scheduling profiles run: the primary (decode or aggregated) profile, the prefill
 * profile and the PD decider that chooses per request whether it runs. It is the plugin kind of
 * llm-d's {@code single-profile-handler} and {@code disagg-profile-handler}; a configuration has at
 * most one. Called once, when the configuration is loaded, after every plugin and profile exists.
 */
@FunctionalInterface
public interface ProfileHandler {

  /**
   * Chooses the profiles.
   *
   * @throws ConfigException (from {@link Setup#invalid}) when its parameters do not fit the
   *     configuration
   */
  void configure(Setup setup);

  /** The loaded configuration as a profile handler sees it, and the choices it makes. */
  final class Setup {
    private final List<String> profiles;
    private final Map<String, PdDecider> deciders;
    private final SchedulerPluginProvider.Context context;
    private String primary;
    private String prefill;
    private PdDecider decider;
    private Boolean pdEnabled;

    Setup(
        List<String> profiles,
        Map<String, PdDecider> deciders,
        SchedulerPluginProvider.Context context) {
      this.profiles = List.copyOf(profiles);
      this.deciders = new LinkedHashMap<>(deciders);
      this.context = context;
    }

    /** The profile names, in configuration order. */
    public List<String> profiles() {
      return profiles;
    }

    /**
     * The profile {@code name}, checked to exist.
     *
     * @param parameter the parameter that named it, for the error
     * @throws ConfigException when there is no such profile
     */
    public String profile(String name, String parameter) {
      if (!profiles.contains(name)) {
        throw invalid(
            parameter, "\"" + name + "\" is not a profile; known: " + String.join(", ", profiles));
      }
      return name;
    }

    /**
     * The PD decider plugin named {@code pluginName}.
     *
     * @param parameter the parameter that named it, for the error
     * @throws ConfigException when no PD decider plugin has that name
     */
    public PdDecider decider(String pluginName, String parameter) {
      PdDecider d = deciders.get(pluginName);
      if (d == null) {
        throw invalid(
            parameter,
            "\""
                + pluginName
                + "\" is not a PD decider plugin; known deciders: "
                + (deciders.isEmpty() ? "none" : String.join(", ", deciders.keySet())));
      }
      return d;
    }

    /** Sets the profile that picks the decode (or aggregated) endpoint. */
    public Setup primaryProfile(String name) {
      this.primary = Objects.requireNonNull(name, "name");
      return this;
    }

    /** Sets the profile that picks the prefill endpoint. */
    public Setup prefillProfile(String name) {
      this.prefill = Objects.requireNonNull(name, "name");
      return this;
    }

    /** Sets the PD decider. */
    public Setup pdDecider(PdDecider d) {
      this.decider = Objects.requireNonNull(d, "decider");
      return this;
    }

    /** Switches PD disaggregation on or off (left to the scheduler's default when not called). */
    public Setup pdEnabled(boolean enabled) {
      this.pdEnabled = enabled;
      return this;
    }

    /**
     * An error naming one of the handler's parameters (see {@link
     * SchedulerPluginProvider.Context#invalid}).
     */
    public ConfigException invalid(String parameter, String problem) {
      return context.invalid(parameter, problem);
    }

    void applyTo(Scheduler.Builder b) {
      b.primaryProfile(primary != null ? primary : profiles.get(0));
      if (prefill != null) {
        b.prefillProfile(prefill);
      }
      if (decider != null) {
        b.pdDecider(decider);
      }
      if (pdEnabled != null) {
        b.pdEnabled(pdEnabled);
      }
    }
  }
}
