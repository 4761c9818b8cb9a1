package io.kvroute.kvindex.hybrid;

import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.contract.BlockIndexContract;

/** The hybrid layer keeps every behaviour of the index it wraps for plain (one-group) pods. */
class HybridBlockIndexContractTest extends BlockIndexContract {
  @Override
  protected BlockIndex createIndex(IndexConfig config) {
    return HybridBlockIndex.inMemory(config);
  }
}
