package io.kvroute.connector;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.io.OutputStream;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class KVConnectorsTest {

  /** A connector that only exists to be discovered. */
  public static final class EchoProvider implements KVConnectorProvider {
    /** For ServiceLoader. */
    public EchoProvider() {}

    @Override
    public String type() {
      return "echo";
    }

    @Override
    public KVConnector create(Context context) {
      return new KVConnector() {
        @Override
        public String type() {
          return "echo";
        }

        @Override
        public CompletableFuture<DecodeRequest> prepareDecode(PdRequest request) {
          return CompletableFuture.failedFuture(new UnsupportedOperationException());
        }

        @Override
        public CompletableFuture<StreamingResponse> proxy(PdRequest request) {
          return CompletableFuture.failedFuture(new UnsupportedOperationException());
        }
      };
    }
  }

  @Test
  void aJarWithOnlyAServicesEntryIsDiscovered(@TempDir Path dir) throws IOException {
    // The provider class is on the test class path; the jar adds nothing but the services entry,
    // as a gateway team's connector jar would.
    Path jar = dir.resolve("custom-connector.jar");
    try (JarOutputStream out = new JarOutputStream(Files.newOutputStream(jar))) {
      out.putNextEntry(new JarEntry("META-INF/services/" + KVConnectorProvider.class.getName()));
      out.write((EchoProvider.class.getName() + "\n").getBytes(StandardCharsets.UTF_8));
      out.closeEntry();
    }
    try (URLClassLoader cl =
        new URLClassLoader(new URL[] {jar.toUri().toURL()}, getClass().getClassLoader())) {
      KVConnectors registry = KVConnectors.discover(cl);
      assertThat(registry.types()).contains("echo");
      assertThat(registry.provider("ECHO")).isInstanceOf(EchoProvider.class);
    }
  }

  @Test
  void unknownTypeListsTheKnownOnes() {
    KVConnectors registry = KVConnectors.builder().register(new EchoProvider()).build();
    assertThatThrownBy(() -> registry.provider("nixl2"))
        .isInstanceOf(ConnectorException.UnknownConnectorException.class)
        .hasMessageContaining("no KVConnector of type \"nixl2\"; known: echo");
  }

  @Test
  void explicitRegistrationWinsAndDuplicatesAreRejected() {
    assertThatThrownBy(
            () -> KVConnectors.builder().register(new EchoProvider()).register(new EchoProvider()))
        .hasMessageContaining("two providers registered for connector type \"echo\"");
    KVConnectorProvider upper =
        new KVConnectorProvider() {
          @Override
          public String type() {
            return "Echo";
          }

          @Override
          public KVConnector create(Context context) {
            throw new UnsupportedOperationException();
          }
        };
    assertThatThrownBy(() -> KVConnectors.builder().register(upper))
        .hasMessageContaining("must be a non-blank lower-case name");
  }

  @Test
  void emptyRegistrySaysNone() {
    assertThatThrownBy(() -> KVConnectors.builder().build().provider("http"))
        .hasMessageContaining("known: (none)");
  }

  static void unused(OutputStream o) {}
}
