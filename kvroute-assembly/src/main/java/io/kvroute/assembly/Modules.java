package io.kvroute.assembly;

import io.kvroute.config.ConfigException;

/** Checks that an optional kvroute module a setting needs is on the class path. */
final class Modules {
  private Modules() {}

  /**
   * Does nothing when {@code className} can be loaded; otherwise fails naming the setting and the
   * artifact that brings the class.
   *
   * @throws ConfigException at {@code path}
   */
  static void require(String className, String path, String artifact) {
    try {
      Class.forName(className, false, Modules.class.getClassLoader());
    } catch (ClassNotFoundException | LinkageError e) {
      throw new ConfigException(
          path,
          "needs io.kvroute:"
              + artifact
              + " on the class path (add the dependency, or remove the setting)");
    }
  }
}
