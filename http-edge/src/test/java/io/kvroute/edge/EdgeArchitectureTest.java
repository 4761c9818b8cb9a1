package io.kvroute.edge;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.codeUnits;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.domain.JavaCodeUnit;
import com.tngtech.archunit.core.domain.JavaModifier;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.lang.ArchCondition;
import com.tngtech.archunit.lang.ConditionEvents;
import com.tngtech.archunit.lang.SimpleConditionEvent;
import org.junit.jupiter.api.Test;

/** Netty stays inside {@code io.kvroute.edge.internal}: the public package never touches it. */
class EdgeArchitectureTest {
  private static final JavaClasses CLASSES =
      new ClassFileImporter()
          .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
          .importPackages("io.kvroute.edge");

  @Test
  void thePublicPackageDoesNotDependOnNetty() {
    noClasses()
        .that()
        .resideInAPackage("io.kvroute.edge")
        .should()
        .dependOnClassesThat()
        .resideInAnyPackage("io.netty..")
        .because("no Netty type may appear in the edge's API")
        .check(CLASSES);
  }

  @Test
  void publicMethodsOfInternalClassesDoNotExposeNettyToOtherModules() {
    // EdgeServer only calls NettyEdge, whose public methods take and return JDK or edge types
    noClasses()
        .that()
        .resideInAPackage("io.kvroute.edge")
        .should()
        .accessClassesThat()
        .resideInAnyPackage("io.netty..")
        .check(CLASSES);
  }

  @Test
  void noPublicSignatureInTheModuleNamesANettyType() {
    codeUnits()
        .that(
            DescribedPredicate.describe(
                "are public members of public classes",
                (JavaCodeUnit u) ->
                    u.getModifiers().contains(JavaModifier.PUBLIC)
                        && u.getOwner().getModifiers().contains(JavaModifier.PUBLIC)))
        .should(
            new ArchCondition<JavaCodeUnit>("name no Netty type in their signature") {
              @Override
              public void check(JavaCodeUnit unit, ConditionEvents events) {
                for (JavaClass c :
                    unit.getParameterTypes().stream().map(t -> t.toErasure()).toList()) {
                  if (c.getPackageName().startsWith("io.netty")) {
                    events.add(
                        SimpleConditionEvent.violated(
                            unit, unit.getFullName() + " takes " + c.getName()));
                  }
                }
                JavaClass r = unit.getRawReturnType();
                if (r.getPackageName().startsWith("io.netty")) {
                  events.add(
                      SimpleConditionEvent.violated(
                          unit, unit.getFullName() + " returns " + r.getName()));
                }
              }
            })
        .check(CLASSES);
  }
}
