package io.kvroute.scoring.internal;

import io.kvroute.config.ConfigException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * llm-d's {@code EndpointPickerConfig} document as kvroute binds it: plugin instances and the
 * scheduling profiles that list them. {@code featureGates}, {@code dataLayer}, {@code flowControl},
 * {@code requestHandler} and {@code saturationDetector} are accepted so that llm-d files load as
 * written, and ignored. Validated on construction (paths relative to the document).
 *
 * @param apiVersion {@code llm-d.ai/v1alpha1} (or the older {@code
 *     inference.networking.x-k8s.io/v1alpha1}); not checked
 * @param kind {@code EndpointPickerConfig} when given
 * @param featureGates ignored
 * @param plugins the plugin instances, at least one
 * @param schedulingProfiles the profiles; null: one {@code default} profile with every filter,
 *     scorer and picker
 * @param dataLayer ignored
 * @param flowControl ignored
 * @param requestHandler ignored
 * @param saturationDetector ignored
 */
public record EndpointPickerConfig(
    String apiVersion,
    String kind,
    List<String> featureGates,
    List<Plugin> plugins,
    List<SchedulingProfile> schedulingProfiles,
    Object dataLayer,
    Object flowControl,
    Object requestHandler,
    Object saturationDetector) {

  /** Validates. */
  public EndpointPickerConfig {
    if (kind != null && !kind.equals("EndpointPickerConfig")) {
      throw new ConfigException("kind", "must be EndpointPickerConfig, was \"" + kind + "\"");
    }
    if (plugins == null || plugins.isEmpty()) {
      throw new ConfigException("plugins", "must list at least one plugin");
    }
    plugins = List.copyOf(plugins);
    Map<String, Integer> names = new HashMap<>();
    for (int i = 0; i < plugins.size(); i++) {
      Integer first = names.putIfAbsent(plugins.get(i).name(), i);
      if (first != null) {
        throw new ConfigException(
            "plugins[" + i + "].name",
            "\""
                + plugins.get(i).name()
                + "\" is already the name of plugins["
                + first
                + "] (a name defaults to the type; name one of them)");
      }
    }
    if (schedulingProfiles != null) {
      if (schedulingProfiles.isEmpty()) {
        throw new ConfigException(
            "schedulingProfiles", "must list at least one profile (or be left out)");
      }
      schedulingProfiles = List.copyOf(schedulingProfiles);
      Map<String, Integer> profiles = new HashMap<>();
      for (int i = 0; i < schedulingProfiles.size(); i++) {
        Integer first = profiles.putIfAbsent(schedulingProfiles.get(i).name(), i);
        if (first != null) {
          throw new ConfigException(
              "schedulingProfiles[" + i + "].name",
              "\""
                  + schedulingProfiles.get(i).name()
                  + "\" is already the name of schedulingProfiles["
                  + first
                  + "]");
        }
      }
    }
    featureGates = featureGates == null ? List.of() : List.copyOf(featureGates);
  }

  /**
   * One plugin instance.
   *
   * @param name the instance name (default: the type)
   * @param type the plugin type, e.g. {@code queue-scorer}
   * @param parameters the type's parameters (bound later to its record)
   */
  public record Plugin(String name, String type, Map<String, Object> parameters) {
    /** Validates and applies the name's default. */
    public Plugin {
      if (type == null || type.isBlank()) {
        throw new ConfigException("type", "is required (the plugin type, e.g. queue-scorer)");
      }
      if (name == null) {
        name = type;
      } else if (name.isBlank()) {
        throw new ConfigException("name", "must not be blank");
      }
    }
  }

  /**
   * A scheduling profile.
   *
   * @param name the profile name
   * @param plugins its filters, scorers and picker, in order
   */
  public record SchedulingProfile(String name, List<PluginRef> plugins) {
    /** Validates. */
    public SchedulingProfile {
      if (name == null || name.isBlank()) {
        throw new ConfigException("name", "is required");
      }
      if (plugins == null || plugins.isEmpty()) {
        throw new ConfigException("plugins", "must list at least one pluginRef");
      }
      plugins = List.copyOf(plugins);
    }
  }

  /**
   * A profile's reference to a plugin instance.
   *
   * @param pluginRef the instance name
   * @param weight a scorer's weight (default 1; finite, ≥ 0)
   */
  public record PluginRef(String pluginRef, Double weight) {
    /** Validates. */
    public PluginRef {
      if (pluginRef == null || pluginRef.isBlank()) {
        throw new ConfigException("pluginRef", "is required (the name of a plugin)");
      }
      if (weight != null && (!(weight >= 0) || weight.isInfinite())) {
        throw new ConfigException("weight", "must be a finite number >= 0, was " + weight);
      }
    }
  }
}
