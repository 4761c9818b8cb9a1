package io.kvroute.spring.gateway;

import io.kvroute.router.KvRouter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.cloud.gateway.filter.GlobalFilter;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Auto-configuration of kvroute for Spring Cloud Gateway: a {@link KvRouter} built from the {@code
 * kvroute.*} properties ({@link KvRouteProperties}; closed, after draining requests in flight, when
 * the application stops), the {@link KvRouteGlobalFilter} and, when Spring Boot's health support is
 * present, the {@link KvRouteHealthIndicator}. The router's metrics go to the application's {@link
 * MeterRegistry} when it has one. {@code kvroute.enabled=false} turns it all off; an application
 * bean of type {@link KvRouter} replaces the one built from properties.
 */
@AutoConfiguration(
    afterName = {
      "org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration",
      "org.springframework.boot.micrometer.metrics.autoconfigure.export.simple.SimpleMetricsExportAutoConfiguration"
    })
@ConditionalOnProperty(
    prefix = KvRouteProperties.PREFIX,
    name = "enabled",
    havingValue = "true",
    matchIfMissing = true)
@EnableConfigurationProperties(KvRouteProperties.class)
public class KvRouteAutoConfiguration {
  private static final Logger log = LoggerFactory.getLogger(KvRouteAutoConfiguration.class);

  /** Used by Spring. */
  public KvRouteAutoConfiguration() {}

  /** The index freshness the KV-event feed reports to (read by the health indicator). */
  @Bean
  @ConditionalOnMissingBean(KvRouter.class)
  EventFreshness kvrouteEventFreshness() {
    return new EventFreshness(System::nanoTime);
  }

  /**
   * The router the properties describe.
   *
   * @throws io.kvroute.config.ConfigException naming the property when a connector section, the
   *     scheduler file or a local tokenizer is invalid
   */
  @Bean(destroyMethod = "close")
  @ConditionalOnMissingBean
  public KvRouter kvRouter(
      KvRouteProperties properties,
      ObjectProvider<MeterRegistry> meterRegistry,
      ObjectProvider<EventFreshness> freshness) {
    MeterRegistry meters = meterRegistry.getIfAvailable(SimpleMeterRegistry::new);
    if (properties.getEndpoints().isEmpty()) {
      log.warn(
          "kvroute: {}.endpoints lists no endpoint; requests fail until endpoints are added"
              + " (KvRouter.addEndpoint)",
          KvRouteProperties.PREFIX);
    }
    KvRouter router =
        RouterFactory.build(
            properties,
            meters,
            Thread.currentThread().getContextClassLoader(),
            properties.getIndex() == null ? null : freshness.getIfAvailable());
    log.info(
        "kvroute: routing over {} endpoints in {} mode",
        router.endpoints().size(),
        properties.getMode().name().toLowerCase(java.util.Locale.ROOT));
    return router;
  }

  /** The filter routing the OpenAI paths. */
  @Bean
  @ConditionalOnMissingBean
  @ConditionalOnClass(GlobalFilter.class)
  public KvRouteGlobalFilter kvRouteGlobalFilter(KvRouter router, KvRouteProperties properties) {
    return new KvRouteGlobalFilter(
        router, properties.getMode(), (int) properties.getMaxRequestSize().toBytes());
  }

  /** The health contribution, when Spring Boot's health support is on the class path. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(name = "org.springframework.boot.health.contributor.HealthIndicator")
  static class Health {
    @Bean
    @ConditionalOnMissingBean(name = "kvrouteHealthIndicator")
    KvRouteHealthIndicator kvrouteHealthIndicator(
        KvRouter router, KvRouteProperties properties, ObjectProvider<EventFreshness> freshness) {
      return new KvRouteHealthIndicator(
          router, properties.getIndex() == null ? null : freshness.getIfAvailable());
    }
  }
}
