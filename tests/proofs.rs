//! Property tests: every proof verifies; any flipped bit, swapped sibling,
//! wrong side, wrong index or wrong count is refused.

use grove::merkle::{self, Hash};
use proptest::prelude::*;

fn tree(n: u64, salt: u8) -> (Vec<Hash>, Vec<Vec<Hash>>, Hash) {
    let leaves: Vec<Hash> = (0..n)
        .map(|i| merkle::leaf_hash(&[salt, (i % 251) as u8, (i / 251) as u8]))
        .collect();
    let levels = merkle::levels(leaves.clone()).unwrap();
    let root = levels.last().unwrap()[0];
    (leaves, levels, root)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn every_proof_verifies(n in 1u64..300, salt: u8, pick: u64) {
        let (leaves, levels, root) = tree(n, salt);
        let i = pick % n;
        let proof = merkle::proof(&levels, i).unwrap();
        prop_assert!(merkle::verify(&leaves[i as usize], i, n, &proof, &root).is_ok());
    }

    #[test]
    fn tampering_is_refused(n in 2u64..300, salt: u8, pick: u64, step_pick: usize, bit in 0usize..256, kind in 0u8..6) {
        let (leaves, levels, root) = tree(n, salt);
        let i = pick % n;
        let mut proof = merkle::proof(&levels, i).unwrap();
        let mut leaf = leaves[i as usize];
        let mut index = i;
        let mut count = n;
        let mut root = root;
        let s = step_pick % proof.len();
        match kind {
            0 => proof[s].sibling[bit / 8] ^= 1 << (bit % 8),
            1 => proof[s].is_left = !proof[s].is_left,
            2 => leaf[bit / 8] ^= 1 << (bit % 8),
            3 => root[bit / 8] ^= 1 << (bit % 8),
            4 => {
                // Wrong index: any other leaf position of the same tree.
                index = (i + 1 + (bit as u64 % (n - 1))) % n;
                prop_assume!(leaves[index as usize] != leaf);
            }
            _ => {
                // Wrong count. The proof binds the count through its length
                // (the tree height) and the index bound; counts of the same
                // height and above the index fold to the same root by design,
                // which is why a root is always published with its count.
                count = if bit % 2 == 0 { (n * 2).next_power_of_two() + (bit as u64 % 7) } else { i.min(bit as u64 % n) };
                prop_assume!(count == 0 || count <= i || merkle::height(count) != merkle::height(n));
            }
        }
        prop_assert!(merkle::verify(&leaf, index, count, &proof, &root).is_err());
    }

    #[test]
    fn swapped_siblings_are_refused(n in 3u64..300, salt: u8, pick: u64, a: usize, b: usize) {
        let (leaves, levels, root) = tree(n, salt);
        let i = pick % n;
        let mut proof = merkle::proof(&levels, i).unwrap();
        let (a, b) = (a % proof.len(), b % proof.len());
        prop_assume!(a != b && proof[a].sibling != proof[b].sibling);
        let tmp = proof[a].sibling;
        proof[a].sibling = proof[b].sibling;
        proof[b].sibling = tmp;
        prop_assert!(merkle::verify(&leaves[i as usize], i, n, &proof, &root).is_err());
    }
}
