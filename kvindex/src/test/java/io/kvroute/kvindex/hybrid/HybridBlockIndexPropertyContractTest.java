package io.kvroute.kvindex.hybrid;

import io.kvroute.kvindex.BlockIndex;
import io.kvroute.kvindex.IndexConfig;
import io.kvroute.kvindex.contract.BlockIndexPropertyContract;

/** The index property contract through the hybrid layer (plain pods). */
class HybridBlockIndexPropertyContractTest extends BlockIndexPropertyContract {
  @Override
  protected BlockIndex createIndex(IndexConfig config) {
    return HybridBlockIndex.inMemory(config);
  }
}
