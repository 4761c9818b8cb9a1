package io.kvroute.kubernetes;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.server.mock.KubernetesCrudDispatcher;
import io.fabric8.kubernetes.client.server.mock.KubernetesMockServer;
import io.fabric8.mockwebserver.Context;
import io.fabric8.mockwebserver.MockWebServer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;

/**
 * A fabric8 mock API server in CRUD mode (plain HTTP) per test, with its client.
 *
 * <p>Not {@code @EnableKubernetesMockClient}: that extension destroys the server after the test's
 * own {@code @AfterEach}, so the discoveries' watches would be closed by the client first; the mock
 * server (8.0.0, Vert.x 5) can then block its event loop for up to a minute in {@code
 * WatchEventsListener.onClosed} (awaiting an executor whose queued close needs that event loop) and
 * fail its own shutdown. Here the server goes first, then the discoveries.
 */
abstract class MockCluster {
  static final String NS = "llm";

  KubernetesMockServer server;
  KubernetesClient client;
  final List<AutoCloseable> toClose = new ArrayList<>();

  @BeforeEach
  void startServer() {
    server =
        new KubernetesMockServer(
            new Context(),
            new MockWebServer(),
            new HashMap<>(),
            new KubernetesCrudDispatcher(),
            false);
    server.init();
    client = server.createClient();
  }

  @AfterEach
  void stopServer() throws Exception {
    server.destroy();
    for (int i = toClose.size() - 1; i >= 0; i--) {
      toClose.get(i).close();
    }
    client.close();
  }

  /** Creates a pod in the namespace. */
  void create(Pod p) {
    client.pods().inNamespace(NS).resource(p).create();
  }

  /** A discovery of this cluster's namespace into {@code sink}, to complete and build. */
  KubernetesDiscovery.Builder discover(EndpointSink sink) {
    return KubernetesDiscovery.builder(sink).client(client).namespace(NS);
  }

  /** Closed after the server is destroyed, last registered first. */
  <T extends AutoCloseable> T closeLater(T c) {
    toClose.add(c);
    return c;
  }
}
