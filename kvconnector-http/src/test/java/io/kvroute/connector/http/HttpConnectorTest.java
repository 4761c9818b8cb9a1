package io.kvroute.connector.http;

import io.kvroute.connector.contract.KVConnectorContract;

/**
 * The {@code http} connector against the contract, whose prefill rules (no transfer fields, {@code
 * max_tokens} and {@code max_completion_tokens} of 1) are the contract's defaults.
 */
class HttpConnectorTest extends KVConnectorContract {

  @Override
  protected String type() {
    return "http";
  }
}
