package io.kvroute.examples.scg;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * A Spring Cloud Gateway application that routes OpenAI requests with kvroute: the smallest
 * complete use of the {@code kvroute-spring-cloud-gateway} starter, runnable against two {@code
 * kvroute sim} pods (see this module's README).
 *
 * <p>There is no kvroute code here. What a user copies into an application of their own is:
 *
 * <ul>
 *   <li>the dependencies of this module's {@code pom.xml}: {@code kvroute-spring-cloud-gateway},
 *       the connector the pods speak ({@code kvconnector-nixl}) and, for {@code /actuator/health}
 *       and the meters, {@code spring-boot-starter-actuator}, under the application's own Spring
 *       Boot and Spring Cloud BOMs;
 *   <li>{@code src/main/resources/application.yaml}: a Spring Cloud Gateway route for {@code
 *       /v1/**} (its URI is not used in relay mode) and the {@code kvroute.*} properties naming the
 *       prefill and decode pods and their connector.
 * </ul>
 *
 * <p>The starter's auto-configuration builds a {@code KvRouter} from those properties and adds a
 * non-blocking {@code GlobalFilter} that, for {@code POST /v1/completions} and {@code POST
 * /v1/chat/completions}, picks a (prefill, decode) pair, runs prefill then decode through the NIXL
 * connector, and streams the decode answer back.
 */
@SpringBootApplication
public class SampleGatewayApplication {

  /** Only Spring Boot creates this class. */
  SampleGatewayApplication() {}

  /**
   * Starts the gateway (port 8080 unless {@code SERVER_PORT} or {@code --server.port} says
   * otherwise).
   *
   * @param args Spring Boot command-line arguments, for example {@code --kvroute.mode=relay}
   */
  public static void main(String[] args) {
    SpringApplication.run(SampleGatewayApplication.class, args);
  }
}
