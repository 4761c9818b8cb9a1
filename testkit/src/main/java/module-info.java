/**
 * The in-process vLLM simulator (real time) and the vLLM engine model (virtual time), sharing one
 * block pool and cost model. JUnit is optional: only the extension needs it.
 */
module io.kvroute.testkit {
  requires transitive io.kvroute.kvindex;
  requires transitive com.fasterxml.jackson.databind;
  requires org.zeromq.jeromq;
  requires org.slf4j;
  requires jdk.httpserver;
  requires static transitive org.junit.jupiter.api;

  exports io.kvroute.testkit;
  exports io.kvroute.testkit.engine;
}
