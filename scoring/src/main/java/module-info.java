/**
 * Scheduling: filters, scorers, pickers, PD deciders, the tokenizer SPI, metrics scraping and the
 * {@link io.kvroute.scoring.Scheduler}.
 */
module io.kvroute.scoring {
  requires transitive io.kvroute.connector;
  requires transitive io.kvroute.kvindex;
  requires transitive io.kvroute.config;
  requires transitive micrometer.core;
  requires com.fasterxml.jackson.databind;
  requires com.fasterxml.jackson.dataformat.yaml;
  requires org.slf4j;

  exports io.kvroute.scoring;

  // Jackson (through the config binder) binds the plugins' parameter records.
  opens io.kvroute.scoring.internal to
      com.fasterxml.jackson.databind;

  uses io.kvroute.scoring.SchedulerPluginProvider;

  provides io.kvroute.scoring.SchedulerPluginProvider with
      io.kvroute.scoring.internal.BuiltinFilters.DecodeFilter,
      io.kvroute.scoring.internal.BuiltinFilters.PrefillFilter,
      io.kvroute.scoring.internal.BuiltinFilters.RoleFilter,
      io.kvroute.scoring.internal.BuiltinFilters.LabelSelectorFilter,
      io.kvroute.scoring.internal.BuiltinFilters.ByLabelSelector,
      io.kvroute.scoring.internal.BuiltinFilters.PdPairingFilter,
      io.kvroute.scoring.internal.BuiltinFilters.HealthFilter,
      io.kvroute.scoring.internal.BuiltinFilters.SessionAffinityFilter,
      io.kvroute.scoring.internal.BuiltinFilters.LoraAvailabilityFilter,
      io.kvroute.scoring.internal.BuiltinScorers.PrecisePrefixCacheScorer,
      io.kvroute.scoring.internal.BuiltinScorers.PrefixCacheScorer,
      io.kvroute.scoring.internal.BuiltinScorers.LoadAwareScorer,
      io.kvroute.scoring.internal.BuiltinScorers.ActiveRequestScorer,
      io.kvroute.scoring.internal.BuiltinScorers.QueueScorer,
      io.kvroute.scoring.internal.BuiltinScorers.RunningRequestsSizeScorer,
      io.kvroute.scoring.internal.BuiltinScorers.KvCacheUtilizationScorer,
      io.kvroute.scoring.internal.BuiltinScorers.LoraAffinityScorer,
      io.kvroute.scoring.internal.BuiltinScorers.SessionAffinityScorer,
      io.kvroute.scoring.internal.BuiltinScorers.NoHitLruScorer,
      io.kvroute.scoring.internal.BuiltinScorers.PredictedLatencyScorer,
      io.kvroute.scoring.internal.BuiltinPlugins.MaxScorePicker,
      io.kvroute.scoring.internal.BuiltinPlugins.RandomPicker,
      io.kvroute.scoring.internal.BuiltinPlugins.WeightedRandomPicker,
      io.kvroute.scoring.internal.BuiltinPlugins.PrefixBasedPdDecider,
      io.kvroute.scoring.internal.BuiltinPlugins.AlwaysDisaggPdDecider,
      io.kvroute.scoring.internal.BuiltinPlugins.ApproxPrefixCacheProducer,
      io.kvroute.scoring.internal.BuiltinPlugins.SingleProfileHandler,
      io.kvroute.scoring.internal.BuiltinPlugins.DisaggProfileHandler,
      io.kvroute.scoring.internal.BuiltinPlugins.PdProfileHandler;
}
