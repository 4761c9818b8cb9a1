/**
 * Scheduling: filters, scorers, pickers, PD deciders, the tokenizer SPI, metrics scraping and the
 * {@link io.kvroute.scoring.Scheduler}.
 */
module io.kvroute.scoring {
  requires transitive io.kvroute.connector;
  requires transitive io.kvroute.kvindex;
  requires transitive micrometer.core;
  requires com.fasterxml.jackson.databind;
  requires com.fasterxml.jackson.dataformat.yaml;
  requires org.slf4j;

  exports io.kvroute.scoring;
}
