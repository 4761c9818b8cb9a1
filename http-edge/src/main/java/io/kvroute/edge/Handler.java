package io.kvroute.edge;

/**
 * Answers requests on a route.
 *
 * <p>Runs on the connection's event-loop thread and must not block: a handler that waits for
 * something (an upstream call, a tokenizer) returns and answers the exchange later, from any
 * thread. An exception thrown before the exchange is answered becomes a 500.
 */
@FunctionalInterface
public interface Handler {
  /**
   * Handles one request; answers {@code exchange} exactly once, now or later.
   *
   * @param exchange the request and the means to answer it
   * @throws Exception any failure; answered with a 500 if nothing was answered yet
   */
  void handle(Exchange exchange) throws Exception;
}
