package io.kvroute.architecture;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.members;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.Dependency;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaCodeUnit;
import com.tngtech.archunit.core.domain.JavaField;
import com.tngtech.archunit.core.domain.JavaMember;
import com.tngtech.archunit.core.domain.JavaModifier;
import com.tngtech.archunit.lang.ArchCondition;
import com.tngtech.archunit.lang.ConditionEvents;
import com.tngtech.archunit.lang.SimpleConditionEvent;
import com.tngtech.archunit.library.dependencies.SliceAssignment;
import com.tngtech.archunit.library.dependencies.SliceIdentifier;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The dependency rules of {@code docs/architecture.md} (the module map and its picture), checked
 * over the main classes of every module. A failure names the class, the dependency and the rule;
 * fix the code, or change the map (and {@link Modules}) deliberately.
 */
class ArchitectureTest {

  /**
   * Each module uses only the modules its arrow in the map allows (router → SPI, not → http, but
   * for the one named class {@link Modules#isNamedException} lists).
   */
  @Test
  void moduleDependenciesFollowTheMap() {
    classes()
        .that(inAnyModule())
        .should(dependOnlyOnAllowedModules())
        .because("docs/architecture.md fixes the dependency directions between modules")
        .check(Modules.classes());
  }

  /** No two modules depend on each other, directly or around a loop. */
  @Test
  void modulesAreFreeOfCycles() {
    slices()
        .assignedFrom(
            new SliceAssignment() {
              @Override
              public SliceIdentifier getIdentifierOf(JavaClass c) {
                return Modules.of(c).map(SliceIdentifier::of).orElse(SliceIdentifier.ignore());
              }

              @Override
              public String getDescription() {
                return "kvroute modules";
              }
            })
        .should()
        .beFreeOfCycles()
        .check(Modules.classes());
  }

  /** An {@code .internal} package is used only by its own module. */
  @Test
  void internalPackagesStayInTheirModule() {
    classes()
        .that(inAnyModule())
        .should(notUseAnotherModulesInternals())
        .because("internals are not API; modules share code through exported API only")
        .check(Modules.classes());
  }

  /** The connector SPI depends on the JDK and itself only: a connector author inherits nothing. */
  @Test
  void theSpiDependsOnTheJdkOnly() {
    classes()
        .that(inModule("kvconnector-api"))
        .should()
        .onlyDependOnClassesThat()
        .resideInAnyPackage("java..", "io.kvroute.connector")
        .check(Modules.classes());
  }

  /** The index knows nothing of connectors, and connectors nothing of the index. */
  @Test
  void indexAndConnectorsDoNotKnowEachOther() {
    classes()
        .that(inModule("kvindex"))
        .should()
        .onlyDependOnClassesThat(notInPackages("io.kvroute.connector", "io.kvroute.pd"))
        .check(Modules.classes());
    classes()
        .that(inAnyModule("kvconnector-"))
        .or(inModule("pd"))
        .should()
        .onlyDependOnClassesThat(notInPackages("io.kvroute.kvindex"))
        .check(Modules.classes());
  }

  /**
   * No framework type in a public signature of a core module: gateways on Spring, Vert.x, servlet
   * or ext_proc must adapt with plain Java. Micrometer may appear where a module binds to it (the
   * listener bindings, meter-registry options); the SPI has no dependency at all (see above).
   */
  @Test
  void noFrameworkTypesInPublicSignatures() {
    List<String> everywhere =
        List.of(
            "reactor.",
            "io.netty.",
            "org.springframework.",
            "io.grpc.",
            "okhttp3.",
            "okio.",
            "io.github.resilience4j.");
    Map<String, List<String>> alsoForbidden =
        Map.of(
            "pd", List.of("com.fasterxml.jackson."),
            "router", List.of("com.fasterxml.jackson."),
            "kvindex", List.of("com.fasterxml.jackson."),
            "scoring", List.of("com.fasterxml.jackson."));
    for (String module :
        List.of("kvconnector-api", "pd", "kvindex", "scoring", "router", "kvindex-service")) {
      List<String> forbidden = new java.util.ArrayList<>(everywhere);
      forbidden.addAll(alsoForbidden.getOrDefault(module, List.of()));
      members()
          .that(arePublicApiOf(module))
          .should(notMention(forbidden))
          .because("core APIs are plain Java (docs/architecture.md, design decisions)")
          .check(Modules.classes());
    }
  }

  // ---------------------------------------------------------------- predicates and conditions

  private static DescribedPredicate<JavaClass> inModule(String module) {
    return DescribedPredicate.describe(
        "are in module " + module, c -> Modules.of(c).map(module::equals).orElse(false));
  }

  private static DescribedPredicate<JavaClass> inAnyModule(String prefix) {
    return DescribedPredicate.describe(
        "are in a module named " + prefix + "*",
        c -> Modules.of(c).map(m -> m.startsWith(prefix)).orElse(false));
  }

  private static DescribedPredicate<JavaClass> inAnyModule() {
    return DescribedPredicate.describe("are in a kvroute module", c -> Modules.of(c).isPresent());
  }

  private static DescribedPredicate<JavaClass> notInPackages(String... roots) {
    return DescribedPredicate.describe(
        "are outside " + String.join(", ", roots),
        c -> {
          for (String r : roots) {
            if (c.getPackageName().equals(r) || c.getPackageName().startsWith(r + ".")) {
              return false;
            }
          }
          return true;
        });
  }

  private static ArchCondition<JavaClass> dependOnlyOnAllowedModules() {
    return new ArchCondition<>("depend only on the modules the map allows") {
      @Override
      public void check(JavaClass c, ConditionEvents events) {
        String from = Modules.of(c).orElseThrow();
        Set<String> allowed = Modules.ALLOWED.getOrDefault(from, Set.of());
        for (Dependency d : c.getDirectDependenciesFromSelf()) {
          Optional<String> to = Modules.of(d.getTargetClass());
          if (to.isPresent()
              && !to.get().equals(from)
              && !allowed.contains(to.get())
              && !Modules.isNamedException(from, d.getTargetClass().getName())) {
            events.add(
                SimpleConditionEvent.violated(
                    d, from + " must not depend on " + to.get() + ": " + d.getDescription()));
          }
        }
      }
    };
  }

  /**
   * One declared exception: kvindex-redis fills {@code PrefixMatch}es through kvindex's {@code
   * MatchWriter}, exported to it alone by kvindex's module-info (a qualified export).
   */
  private static ArchCondition<JavaClass> notUseAnotherModulesInternals() {
    return new ArchCondition<>("not use another module's .internal packages") {
      @Override
      public void check(JavaClass c, ConditionEvents events) {
        String from = Modules.of(c).orElseThrow();
        for (Dependency d : c.getDirectDependenciesFromSelf()) {
          JavaClass target = d.getTargetClass();
          Optional<String> to = Modules.of(target);
          boolean internal =
              target.getPackageName().contains(".internal.")
                  || target.getPackageName().endsWith(".internal");
          boolean friend =
              from.equals("kvindex-redis")
                  && target.getName().equals("io.kvroute.kvindex.internal.MatchWriter");
          if (internal && to.isPresent() && !to.get().equals(from) && !friend) {
            events.add(
                SimpleConditionEvent.violated(
                    d, from + " uses " + to.get() + "'s internals: " + d.getDescription()));
          }
        }
      }
    };
  }

  /** Public members of public types in the exported (non-internal) packages of {@code module}. */
  private static DescribedPredicate<JavaMember> arePublicApiOf(String module) {
    return DescribedPredicate.describe(
        "are public API of " + module,
        m -> {
          JavaClass owner = m.getOwner();
          return Modules.of(owner).map(module::equals).orElse(false)
              && !owner.getPackageName().contains("internal")
              && isVisible(owner)
              && (m.getModifiers().contains(JavaModifier.PUBLIC)
                  || (m.getModifiers().contains(JavaModifier.PROTECTED)
                      && !owner.getModifiers().contains(JavaModifier.FINAL)));
        });
  }

  private static boolean isVisible(JavaClass c) {
    JavaClass x = c;
    while (x != null) {
      if (!x.getModifiers().contains(JavaModifier.PUBLIC)) {
        return false;
      }
      x = x.getEnclosingClass().orElse(null);
    }
    return true;
  }

  private static ArchCondition<JavaMember> notMention(List<String> forbidden) {
    return new ArchCondition<>("not mention types of " + forbidden) {
      @Override
      public void check(JavaMember m, ConditionEvents events) {
        Set<JavaClass> involved = new LinkedHashSet<>();
        if (m instanceof JavaCodeUnit u) {
          involved.addAll(u.getReturnType().getAllInvolvedRawTypes());
          u.getParameterTypes().forEach(t -> involved.addAll(t.getAllInvolvedRawTypes()));
        } else if (m instanceof JavaField f) {
          involved.addAll(f.getType().getAllInvolvedRawTypes());
        }
        for (JavaClass t : involved) {
          for (String p : forbidden) {
            if (t.getName().startsWith(p)) {
              events.add(
                  SimpleConditionEvent.violated(
                      m, m.getFullName() + " exposes " + t.getName() + " in its signature"));
            }
          }
        }
      }
    };
  }
}
