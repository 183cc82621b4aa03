//! merkle-v1 trees, proofs and shard roots (pure).
