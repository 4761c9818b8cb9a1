package io.kvroute.kvindex;

/** The {@link BlockIndexPropertyContract} on the in-memory index. */
class BlockIndexPropertyTest extends BlockIndexPropertyContract {
  @Override
  protected BlockIndex createIndex(IndexConfig config) {
    return BlockIndex.inMemory(config);
  }
}
