package io.kvroute.architecture;

import static org.assertj.core.api.Assertions.fail;

import com.tngtech.archunit.core.domain.JavaClass;
import java.io.IOException;
import java.io.InputStream;
import java.lang.module.ModuleDescriptor;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.Member;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.jar.JarFile;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * The public API of every library module, dumped as text and compared with the dump checked in at
 * {@code <module>/api/<module>.api} (as OkHttp does). Any change to a public or protected signature
 * of an exported package fails the build until the dump is updated on purpose:
 *
 * <pre>{@code mvn -B verify -pl architecture-tests -am -Dkvroute.api.update=true}</pre>
 *
 * <p>and the {@code .api} diff is reviewed with the change. This guards against accidental breaks;
 * it does not judge binary compatibility (japicmp against a released baseline does that, once there
 * is a release).
 */
class ApiDumpTest {

  @Test
  void publicApiMatchesTheCheckedInDumps() throws Exception {
    Path root = Path.of(System.getProperty("kvroute.root", "..")).toAbsolutePath().normalize();
    boolean update = Boolean.getBoolean("kvroute.api.update");
    TreeMap<String, List<JavaClass>> byModule = new TreeMap<>();
    for (JavaClass c : Modules.classes()) {
      Modules.of(c)
          .filter(Modules.LIBRARIES::contains)
          .ifPresent(m -> byModule.computeIfAbsent(m, k -> new ArrayList<>()).add(c));
    }
    List<String> problems = new ArrayList<>();
    for (var e : byModule.entrySet()) {
      String module = e.getKey();
      String dump = dump(e.getValue());
      Path file = root.resolve(module).resolve("api").resolve(module + ".api");
      if (update) {
        Files.createDirectories(file.getParent());
        Files.writeString(file, dump, StandardCharsets.UTF_8);
        continue;
      }
      String recorded = Files.exists(file) ? Files.readString(file, StandardCharsets.UTF_8) : "";
      if (!recorded.equals(dump)) {
        problems.add(module + " (" + root.relativize(file) + "):\n" + diff(recorded, dump));
      }
    }
    if (!problems.isEmpty()) {
      fail(
          "The public API changed without its dump being updated. If the change is intended, run\n"
              + "  mvn -B verify -pl architecture-tests -am -Dkvroute.api.update=true\n"
              + "and commit the api/*.api files with it.\n\n"
              + String.join("\n", problems));
    }
  }

  /** The module's API: one block per visible type, members sorted, types sorted by name. */
  static String dump(List<JavaClass> classes) throws Exception {
    Set<String> exported = exportedPackages(classes.get(0));
    TreeMap<String, String> blocks = new TreeMap<>();
    for (JavaClass jc : classes) {
      if (!exported.contains(jc.getPackageName())) {
        continue;
      }
      Class<?> c = Class.forName(jc.getName(), false, ApiDumpTest.class.getClassLoader());
      if (!visible(c)) {
        continue;
      }
      boolean subclassable = !Modifier.isFinal(c.getModifiers()) && !c.isInterface();
      TreeSet<String> members = new TreeSet<>();
      List<Member> all = new ArrayList<>();
      all.addAll(List.of(c.getDeclaredConstructors()));
      all.addAll(List.of(c.getDeclaredMethods()));
      all.addAll(List.of(c.getDeclaredFields()));
      for (Member m : all) {
        if (m.isSynthetic() || (m instanceof Method method && method.isBridge())) {
          continue;
        }
        int mod = m.getModifiers();
        if (Modifier.isPublic(mod) || (Modifier.isProtected(mod) && subclassable)) {
          members.add("  " + signature(m).replace(c.getName() + ".", ""));
        }
      }
      blocks.put(
          c.getName(),
          c.toGenericString()
              + supertypes(c)
              + " {\n"
              + members.stream().map(s -> s + "\n").collect(Collectors.joining())
              + "}\n");
    }
    return String.join("\n", blocks.values());
  }

  private static String signature(Member m) {
    String s =
        m instanceof Method method
            ? method.toGenericString()
            : m instanceof Constructor<?> ctor
                ? ctor.toGenericString()
                : ((Field) m).toGenericString();
    return s.replace("java.lang.", "");
  }

  private static String supertypes(Class<?> c) {
    StringBuilder sb = new StringBuilder();
    if (c.getGenericSuperclass() != null
        && c.getSuperclass() != Object.class
        && c.getSuperclass() != Record.class
        && c.getSuperclass() != Enum.class) {
      sb.append(" extends ").append(c.getGenericSuperclass().getTypeName());
    }
    if (c.getGenericInterfaces().length > 0) {
      sb.append(c.isInterface() ? " extends " : " implements ");
      List<String> names = new ArrayList<>();
      for (var t : c.getGenericInterfaces()) {
        names.add(t.getTypeName());
      }
      sb.append(String.join(", ", names));
    }
    return sb.toString();
  }

  private static boolean visible(Class<?> c) {
    for (Class<?> x = c; x != null; x = x.getEnclosingClass()) {
      if (!Modifier.isPublic(x.getModifiers()) || x.isAnonymousClass() || x.isLocalClass()) {
        return false;
      }
    }
    return true;
  }

  /** The packages the module's descriptor exports to everyone. */
  private static Set<String> exportedPackages(JavaClass any)
      throws IOException, URISyntaxException {
    Class<?> c;
    try {
      c = Class.forName(any.getName(), false, ApiDumpTest.class.getClassLoader());
    } catch (ClassNotFoundException e) {
      throw new IllegalStateException(e);
    }
    Path location = Path.of(c.getProtectionDomain().getCodeSource().getLocation().toURI());
    ModuleDescriptor d;
    if (Files.isDirectory(location)) {
      try (InputStream in = Files.newInputStream(location.resolve("module-info.class"))) {
        d = ModuleDescriptor.read(in);
      }
    } else {
      try (JarFile jar = new JarFile(location.toFile());
          InputStream in = jar.getInputStream(jar.getEntry("module-info.class"))) {
        d = ModuleDescriptor.read(in);
      }
    }
    return d.exports().stream()
        .filter(x -> !x.isQualified())
        .map(ModuleDescriptor.Exports::source)
        .collect(Collectors.toSet());
  }

  private static String diff(String before, String after) {
    Set<String> old = new TreeSet<>(before.lines().toList());
    Set<String> now = new TreeSet<>(after.lines().toList());
    StringBuilder sb = new StringBuilder();
    for (String l : old) {
      if (!now.contains(l)) {
        sb.append("  - ").append(l.strip()).append('\n');
      }
    }
    for (String l : now) {
      if (!old.contains(l)) {
        sb.append("  + ").append(l.strip()).append('\n');
      }
    }
    return sb.toString();
  }
}
