package io.kvroute.spring.gateway;

import io.kvroute.assembly.RouterAssembly;
import io.kvroute.router.KvRouter;
import io.kvroute.spring.gateway.internal.KeepAliveReadRearm;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.reactor.netty.NettyServerCustomizer;
import org.springframework.cloud.gateway.filter.GlobalFilter;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.Environment;

/**
 * Auto-configuration of kvroute for Spring Cloud Gateway: the {@code kvroute.*} properties ({@link
 * KvRouteProperties}, bound by kvroute's configuration binder), the router, index and discovery
 * they describe, built by kvroute's composition root ({@link RouterAssembly}, as {@code kvroute
 * gateway} builds them; closed, after draining requests in flight, when the application stops), the
 * {@link KvRouteGlobalFilter} and, when Spring Boot's health support is present, the {@link
 * KvRouteHealthIndicator}. The router's metrics go to the application's {@link MeterRegistry} when
 * it has one. {@code kvroute.enabled=false} turns it all off; an application bean of type {@link
 * KvRouter} replaces the one built from properties.
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
public class KvRouteAutoConfiguration {
  private static final Logger log = LoggerFactory.getLogger(KvRouteAutoConfiguration.class);

  /** Used by Spring. */
  public KvRouteAutoConfiguration() {}

  /**
   * The {@code kvroute.*} properties.
   *
   * @throws io.kvroute.config.ConfigException naming the property when one is unknown or invalid
   */
  @Bean
  @ConditionalOnMissingBean
  public KvRouteProperties kvRouteProperties(Environment environment) {
    return KvRouteBinding.bind(environment);
  }

  /** The index freshness the KV-event feed reports to (read by the health indicator). */
  @Bean
  @ConditionalOnMissingBean(KvRouter.class)
  EventFreshness kvrouteEventFreshness() {
    return new EventFreshness(System::nanoTime);
  }

  /**
   * The router, index and discovery the properties describe.
   *
   * @throws io.kvroute.config.ConfigException naming the property when a setting cannot be applied
   *     (an unknown connector type, a scheduler file or a local tokenizer that does not load, an
   *     optional module missing)
   */
  @Bean(destroyMethod = "close")
  @ConditionalOnMissingBean(KvRouter.class)
  public RouterAssembly kvRouteAssembly(
      KvRouteProperties properties,
      ObjectProvider<MeterRegistry> meterRegistry,
      ObjectProvider<EventFreshness> freshness) {
    MeterRegistry meters = meterRegistry.getIfAvailable(SimpleMeterRegistry::new);
    if (properties.settings().endpoints().isEmpty() && properties.settings().discovery() == null) {
      log.warn(
          "kvroute: {}.endpoints lists no endpoint and there is no {}.discovery; requests fail"
              + " until endpoints are added (KvRouter.addEndpoint)",
          KvRouteProperties.PREFIX,
          KvRouteProperties.PREFIX);
    }
    RouterAssembly.Builder b =
        RouterAssembly.builder(properties.settings())
            .meterRegistry(meters)
            .classLoader(Thread.currentThread().getContextClassLoader());
    EventFreshness f = freshness.getIfAvailable();
    if (properties.settings().index() != null && f != null) {
      b.eventListener(f);
    }
    RouterAssembly assembly;
    try {
      assembly = b.build();
    } catch (io.kvroute.config.ConfigException e) {
      throw KvRouteBinding.named(e);
    }
    log.info(
        "kvroute: routing over {} endpoints in {} mode{}",
        assembly.router().endpoints().size(),
        properties.mode().name().toLowerCase(java.util.Locale.ROOT),
        assembly.discovery().map(d -> "; " + d).orElse(""));
    return assembly;
  }

  /** The router (closed with its assembly). */
  @Bean(destroyMethod = "")
  @ConditionalOnMissingBean
  public KvRouter kvRouter(RouterAssembly assembly) {
    return assembly.router();
  }

  /** The filter routing the OpenAI paths. */
  @Bean
  @ConditionalOnMissingBean
  @ConditionalOnClass(GlobalFilter.class)
  public KvRouteGlobalFilter kvRouteGlobalFilter(KvRouter router, KvRouteProperties properties) {
    return new KvRouteGlobalFilter(router, properties.mode(), properties.maxRequestBytes());
  }

  /**
   * Reactor Netty's server keeps reading a keep-alive connection after the filter answers a queued
   * request at once ({@link KeepAliveReadRearm}: a workaround for reactor/reactor-netty#4361, which
   * left the connection's next request unread). An application bean named {@code
   * kvrouteKeepAliveReadRearm} replaces it.
   */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(name = "org.springframework.boot.reactor.netty.NettyServerCustomizer")
  static class ReactorNettyServer {
    @Bean
    @ConditionalOnMissingBean(name = "kvrouteKeepAliveReadRearm")
    NettyServerCustomizer kvrouteKeepAliveReadRearm() {
      return KeepAliveReadRearm.customizer();
    }
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
          router, properties.settings().index() == null ? null : freshness.getIfAvailable());
    }
  }
}
