package io.kvroute.scoring;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.function.Consumer;

/**
 * One plugin instance made by a {@link SchedulerPluginProvider}: a filter, scorer or picker (which
 * profiles list by {@code pluginRef}), a PD decider (which a profile handler names), a profile
 * handler, or a data producer (which only adjusts scheduler-wide settings). Any plugin may also
 * adjust scheduler-wide settings with {@link #withSchedulerSettings}, as the precise prefix-cache
 * scorer does for speculative entries. Immutable.
 */
public final class SchedulerPlugin {

  /** What a plugin is. */
  public enum Kind {
    /** A {@link Filter}; profiles list it. */
    FILTER,
    /** A {@link Scorer}; profiles list it with a weight. */
    SCORER,
    /** A {@link Picker}; a profile lists at most one. */
    PICKER,
    /** A {@link PdDecider}; a profile handler names it. */
    PD_DECIDER,
    /** A {@link ProfileHandler}; at most one per configuration. */
    PROFILE_HANDLER,
    /** Only scheduler-wide settings (llm-d's data producers). */
    DATA_PRODUCER
  }

  private final Kind kind;
  private final Object instance;
  private final List<Consumer<Scheduler.Builder>> settings;

  private SchedulerPlugin(Kind kind, Object instance, List<Consumer<Scheduler.Builder>> settings) {
    this.kind = kind;
    this.instance = instance;
    this.settings = List.copyOf(settings);
  }

  /** A filter. */
  public static SchedulerPlugin filter(Filter filter) {
    return new SchedulerPlugin(Kind.FILTER, Objects.requireNonNull(filter, "filter"), List.of());
  }

  /** A scorer. */
  public static SchedulerPlugin scorer(Scorer scorer) {
    return new SchedulerPlugin(Kind.SCORER, Objects.requireNonNull(scorer, "scorer"), List.of());
  }

  /** A picker. */
  public static SchedulerPlugin picker(Picker picker) {
    return new SchedulerPlugin(Kind.PICKER, Objects.requireNonNull(picker, "picker"), List.of());
  }

  /** A PD decider. */
  public static SchedulerPlugin pdDecider(PdDecider decider) {
    return new SchedulerPlugin(
        Kind.PD_DECIDER, Objects.requireNonNull(decider, "decider"), List.of());
  }

  /** A profile handler. */
  public static SchedulerPlugin profileHandler(ProfileHandler handler) {
    return new SchedulerPlugin(
        Kind.PROFILE_HANDLER, Objects.requireNonNull(handler, "handler"), List.of());
  }

  /** A data producer: only scheduler-wide settings. */
  public static SchedulerPlugin dataProducer(Consumer<Scheduler.Builder> settings) {
    return new SchedulerPlugin(
        Kind.DATA_PRODUCER, null, List.of(Objects.requireNonNull(settings, "settings")));
  }

  /** The same plugin, also applying {@code settings} to the scheduler being configured. */
  public SchedulerPlugin withSchedulerSettings(Consumer<Scheduler.Builder> more) {
    List<Consumer<Scheduler.Builder>> all = new ArrayList<>(settings);
    all.add(Objects.requireNonNull(more, "settings"));
    return new SchedulerPlugin(kind, instance, all);
  }

  /** What this plugin is. */
  public Kind kind() {
    return kind;
  }

  /** The filter, scorer, picker, decider or handler; null for a data producer. */
  Object instance() {
    return instance;
  }

  /** Applies the scheduler-wide settings. */
  void applySettings(Scheduler.Builder builder) {
    settings.forEach(s -> s.accept(builder));
  }
}
