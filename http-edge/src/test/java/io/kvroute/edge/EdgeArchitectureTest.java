package io.kvroute.edge;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
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
}
