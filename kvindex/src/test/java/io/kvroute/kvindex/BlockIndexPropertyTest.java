package io.kvroute.kvindex;

import io.kvroute.kvindex.contract.BlockIndexPropertyContract;

/** The {@link BlockIndexPropertyContract} on the in-memory index. */
class BlockIndexPropertyTest extends BlockIndexPropertyContract {
  @Override
  protected BlockIndex createIndex(IndexConfig config) {
    return BlockIndex.inMemory(config);
  }
}
