package io.kvroute.architecture;

import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * The module map of {@code docs/architecture.md} as data: which Maven module a class belongs to (by
 * its package root), and which modules each module's main code may depend on.
 */
final class Modules {
  private Modules() {}

  /** Package root → module, most specific first. */
  private static final Map<String, String> ROOTS = new LinkedHashMap<>();

  static {
    ROOTS.put("io.kvroute.connector.http", "kvconnector-http");
    ROOTS.put("io.kvroute.connector.nixl", "kvconnector-nixl");
    ROOTS.put("io.kvroute.connector.lmcache", "kvconnector-lmcache");
    ROOTS.put("io.kvroute.connector.mooncake", "kvconnector-mooncake");
    ROOTS.put("io.kvroute.connector.sglang", "kvconnector-sglang");
    ROOTS.put("io.kvroute.connector.p2pnccl", "kvconnector-p2pnccl");
    ROOTS.put("io.kvroute.connector.sidecar", "kvconnector-sidecar");
    ROOTS.put("io.kvroute.connector", "kvconnector-api");
    ROOTS.put("io.kvroute.pd", "pd");
    ROOTS.put("io.kvroute.kvindex.redis", "kvindex-redis");
    ROOTS.put("io.kvroute.kvindex", "kvindex");
    ROOTS.put("io.kvroute.scoring", "scoring");
    ROOTS.put("io.kvroute.tokenizer", "kvroute-tokenizer-hf");
    ROOTS.put("io.kvroute.router", "router");
    ROOTS.put("io.kvroute.replay", "replay");
    ROOTS.put("io.kvroute.opentelemetry", "kvroute-opentelemetry");
    ROOTS.put("io.kvroute.testkit", "testkit");
    ROOTS.put("io.kvroute.service", "kvindex-service");
    ROOTS.put("io.kvroute.edge", "http-edge");
    ROOTS.put("io.kvroute.config", "config");
    ROOTS.put("io.kvroute.envoy", "kvroute-envoy");
    ROOTS.put("io.kvroute.kubernetes", "kvroute-kubernetes");
    ROOTS.put("io.kvroute.assembly", "kvroute-assembly");
    ROOTS.put("io.kvroute.spring", "kvroute-spring-cloud-gateway");
    ROOTS.put("io.kvroute.cli", "cli");
    ROOTS.put("io.kvroute.examples", "examples");
  }

  /**
   * What a connector family may use: the SPI, the HTTP base and the configuration binder (a
   * connector's parameters are a record the binder binds, checked with its {@code ConfigException}
   * and {@code Checks}; issue 28).
   */
  private static final Set<String> CONNECTOR_FAMILIES =
      Set.of("kvconnector-api", "kvconnector-http", "config");

  /** The library modules: each has a module-info and a checked API dump. */
  static final Set<String> LIBRARIES =
      Set.of(
          "kvconnector-api",
          "kvconnector-http",
          "pd",
          "kvconnector-nixl",
          "kvconnector-lmcache",
          "kvconnector-mooncake",
          "kvconnector-sglang",
          "kvconnector-p2pnccl",
          "kvconnector-sidecar",
          "kvindex",
          "scoring",
          "kvroute-tokenizer-hf",
          "router",
          "replay",
          "kvroute-opentelemetry",
          "testkit",
          "kvindex-service",
          "config",
          "kvindex-redis",
          "kvroute-kubernetes",
          "kvroute-assembly");

  /** {@code modules} and {@code more}. */
  private static Set<String> with(Set<String> modules, String... more) {
    Set<String> all = new LinkedHashSet<>(modules);
    all.addAll(Set.of(more));
    return Set.copyOf(all);
  }

  /**
   * What each module's main code may use of the other kvroute modules (an arrow of the map's
   * dependency diagram; nothing points back up).
   */
  static final Map<String, Set<String>> ALLOWED =
      Map.ofEntries(
          Map.entry("kvconnector-api", Set.of()),
          // the connectors' parameter records are bound by the one configuration binder
          Map.entry("kvconnector-http", Set.of("kvconnector-api", "config")),
          Map.entry("pd", Set.of("kvconnector-api", "config")),
          Map.entry("kvconnector-nixl", CONNECTOR_FAMILIES),
          Map.entry("kvconnector-lmcache", CONNECTOR_FAMILIES),
          Map.entry("kvconnector-mooncake", CONNECTOR_FAMILIES),
          Map.entry("kvconnector-sglang", CONNECTOR_FAMILIES),
          Map.entry("kvconnector-p2pnccl", CONNECTOR_FAMILIES),
          Map.entry("kvconnector-sidecar", Set.of("kvconnector-api")),
          Map.entry("config", Set.of()),
          Map.entry("kvindex", Set.of()),
          Map.entry("kvindex-redis", Set.of("kvindex")),
          Map.entry("scoring", Set.of("kvconnector-api", "kvindex", "config")),
          Map.entry("kvroute-tokenizer-hf", Set.of("scoring", "kvconnector-api", "kvindex")),
          Map.entry("router", Set.of("kvconnector-api", "pd", "scoring", "kvindex")),
          Map.entry(
              "kvroute-opentelemetry",
              Set.of("kvconnector-api", "pd", "scoring", "kvindex", "router")),
          Map.entry("testkit", Set.of("kvindex")),
          // the fleet simulator: the real decision path (router and below) over testkit's engines
          Map.entry("replay", Set.of("router", "scoring", "kvindex", "kvconnector-api", "testkit")),
          Map.entry(
              "kvindex-service",
              Set.of("kvconnector-api", "kvindex", "scoring", "http-edge", "config")),
          Map.entry("kvroute-envoy", Set.of("kvconnector-api", "kvindex", "scoring", "router")),
          Map.entry("kvroute-kubernetes", Set.of("kvconnector-api", "router")),
          // the composition root: the router and its optional parts (index on Redis, discovery in
          // Kubernetes or by P2pNccl registration, local tokenizers, tracing), built from one
          // settings record
          Map.entry(
              "kvroute-assembly",
              Set.of(
                  "kvconnector-api",
                  "pd",
                  "kvindex",
                  "kvindex-redis",
                  "scoring",
                  "router",
                  "config",
                  "kvroute-kubernetes",
                  "kvroute-tokenizer-hf",
                  "kvroute-opentelemetry",
                  "kvconnector-p2pnccl",
                  "kvconnector-sidecar")),
          Map.entry(
              "kvroute-spring-cloud-gateway",
              Set.of(
                  "kvconnector-api",
                  "pd",
                  "kvindex",
                  "scoring",
                  "router",
                  "config",
                  "kvroute-assembly")),
          Map.entry("http-edge", Set.of("kvconnector-api")),
          // the CLI may use every library, and the two servers that are not libraries
          Map.entry("cli", with(LIBRARIES, "http-edge", "kvroute-envoy")),
          Map.entry(
              "examples",
              Set.of("kvconnector-api", "pd", "kvindex", "scoring", "router", "testkit")));

  /**
   * Single classes a module may use outside its arrows, each with its reason: the router reads a
   * client's body with kvconnector-http's {@code OpenAiJson}, the one parse it shares with the
   * connectors (they find the parse on the request and do not parse again); the transport and the
   * connectors stay behind ServiceLoader.
   */
  private static final Map<String, Set<String>> NAMED_EXCEPTIONS =
      Map.of("router", Set.of("io.kvroute.connector.http.OpenAiJson"));

  /** Whether {@code from} may use the class {@code target} although its module is not allowed. */
  static boolean isNamedException(String from, String target) {
    String outer = target.contains("$") ? target.substring(0, target.indexOf('$')) : target;
    return NAMED_EXCEPTIONS.getOrDefault(from, Set.of()).contains(outer);
  }

  private static JavaClasses classes;

  /** Every main class of every kvroute module (test classes excluded). */
  static synchronized JavaClasses classes() {
    if (classes == null) {
      classes =
          new ClassFileImporter()
              .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
              .withImportOption(location -> !location.contains("/io/kvroute/architecture/"))
              .importPackages("io.kvroute");
    }
    return classes;
  }

  /** The module of a package, if it is one of kvroute's. */
  static Optional<String> ofPackage(String pkg) {
    for (Map.Entry<String, String> e : ROOTS.entrySet()) {
      if (pkg.equals(e.getKey()) || pkg.startsWith(e.getKey() + ".")) {
        return Optional.of(e.getValue());
      }
    }
    return Optional.empty();
  }

  /** The module of a class, if it is one of kvroute's. */
  static Optional<String> of(JavaClass c) {
    return ofPackage(c.getPackageName());
  }
}
