//! `merkle-v1` trees, inclusion proofs and shard roots (pure, no IO).
//!
//! Leaf: `SHA-256(0x00 || bytes)`; internal node: `SHA-256(0x03 || left || right)`;
//! an odd last node is paired with itself. A root is only meaningful with its
//! leaf count, which tells `[a, b, c]` from `[a, b, c, c]`.

use sha2::{Digest, Sha256};

/// Name of the hashing rules, recorded with every book.
pub const HASHING: &str = "merkle-v1";

/// A 32-byte SHA-256 digest.
pub type Hash = [u8; 32];

/// Hash of one leaf's bytes.
pub fn leaf_hash(bytes: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0x00]);
    h.update(bytes);
    h.finalize().into()
}

/// Hash of an internal node; order matters.
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([0x03]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// Number of levels above the leaves: 0 for one leaf, else ceil(log2 n).
pub fn height(n: u64) -> usize {
    if n <= 1 {
        0
    } else {
        (64 - (n - 1).leading_zeros()) as usize
    }
}

/// Every level of the tree, leaves first, root last (a single node).
/// Returns `None` for an empty list: an empty tree has no root.
pub fn levels(leaves: Vec<Hash>) -> Option<Vec<Vec<Hash>>> {
    if leaves.is_empty() {
        return None;
    }
    let mut levels = vec![leaves];
    while let Some(last) = levels.last().filter(|l| l.len() > 1) {
        let next = last
            .chunks(2)
            .map(|pair| node_hash(&pair[0], pair.get(1).unwrap_or(&pair[0])))
            .collect();
        levels.push(next);
    }
    Some(levels)
}

/// One step of an inclusion proof: the sibling and whether it stands on the left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProofStep {
    pub sibling: Hash,
    pub is_left: bool,
}

/// The proof for leaf `index`, from the tree's levels (as built by [`levels`]).
/// Returns `None` when `index` is out of range.
pub fn proof(levels: &[Vec<Hash>], index: u64) -> Option<Vec<ProofStep>> {
    let n = levels.first()?.len() as u64;
    if index >= n {
        return None;
    }
    let mut i = index as usize;
    let mut steps = Vec::new();
    for level in levels.iter().take_while(|l| l.len() > 1) {
        steps.push(sibling_step(level, i));
        i /= 2;
    }
    Some(steps)
}

/// The sibling of node `i` in one level: its pair partner, or itself when it
/// is the odd last node.
pub fn sibling_step(level: &[Hash], i: usize) -> ProofStep {
    if i % 2 == 1 {
        ProofStep {
            sibling: level[i - 1],
            is_left: true,
        }
    } else {
        ProofStep {
            sibling: *level.get(i + 1).unwrap_or(&level[i]),
            is_left: false,
        }
    }
}

/// Why a proof was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    #[error("leaf index {index} is not below the leaf count {count}")]
    IndexOutOfRange { index: u64, count: u64 },
    #[error("proof has {got} steps, a tree of {count} leaves needs {want}")]
    WrongLength { got: usize, want: usize, count: u64 },
    #[error("proof step {step} has the sibling on the wrong side for leaf {index}")]
    WrongSide { step: usize, index: u64 },
    #[error("proof step {step} pairs an odd last node with something other than itself")]
    BadSelfPair { step: usize },
    #[error("proof does not lead to the root")]
    RootMismatch,
}

/// Verifies that `leaf` is leaf `index` of the `count`-leaf tree with `root`,
/// per books.md section 6.
pub fn verify(
    leaf: &Hash,
    index: u64,
    count: u64,
    proof: &[ProofStep],
    root: &Hash,
) -> Result<(), ProofError> {
    if index >= count {
        return Err(ProofError::IndexOutOfRange { index, count });
    }
    let want = height(count);
    if proof.len() != want {
        return Err(ProofError::WrongLength {
            got: proof.len(),
            want,
            count,
        });
    }
    let mut acc = *leaf;
    let mut i = index;
    let mut width = count;
    for (step, s) in proof.iter().enumerate() {
        let odd = i % 2 == 1;
        if s.is_left != odd {
            return Err(ProofError::WrongSide { step, index });
        }
        let self_paired = !odd && i == width - 1;
        if self_paired && s.sibling != acc {
            return Err(ProofError::BadSelfPair { step });
        }
        acc = if s.is_left {
            node_hash(&s.sibling, &acc)
        } else {
            node_hash(&acc, &s.sibling)
        };
        i /= 2;
        width = width.div_ceil(2);
    }
    if &acc == root {
        Ok(())
    } else {
        Err(ProofError::RootMismatch)
    }
}

/// One book's entry in a shard root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardEntry {
    pub key: String,
    pub root: Hash,
    pub count: u64,
}

/// The leaf bytes of one book in a shard: `key || 0x00 || root || count (u64 BE)`.
pub fn shard_leaf(entry: &ShardEntry) -> Hash {
    let mut bytes = Vec::with_capacity(entry.key.len() + 41);
    bytes.extend_from_slice(entry.key.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(&entry.root);
    bytes.extend_from_slice(&entry.count.to_be_bytes());
    leaf_hash(&bytes)
}

/// A shard's root: one leaf per book in ascending byte order of key.
/// `None` for a shard with no books (it has no root and is not announced).
pub fn shard_root(entries: &[ShardEntry]) -> Option<Hash> {
    let mut sorted: Vec<&ShardEntry> = entries.iter().collect();
    sorted.sort_by(|a, b| a.key.as_bytes().cmp(b.key.as_bytes()));
    let levels = levels(sorted.iter().map(|e| shard_leaf(e)).collect())?;
    Some(levels[levels.len() - 1][0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heights() {
        assert_eq!([1, 2, 3, 4, 5, 8, 9].map(height), [0, 1, 2, 2, 3, 3, 4]);
    }

    #[test]
    fn every_proof_of_small_trees_verifies() {
        for n in 1..40u64 {
            let leaves: Vec<Hash> = (0..n).map(|i| leaf_hash(&i.to_be_bytes())).collect();
            let lv = levels(leaves.clone()).unwrap();
            let r = lv[lv.len() - 1][0];
            assert_eq!(lv[lv.len() - 1].len(), 1);
            for i in 0..n {
                let p = proof(&lv, i).unwrap();
                verify(&leaves[i as usize], i, n, &p, &r).unwrap();
            }
        }
    }
}
