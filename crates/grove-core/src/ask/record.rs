//! The run record of an ask, and its offline check. Each stage (question,
//! retrieval, evidence map, prompt, raw answer, parsed claims,
//! verification, rendering, label) is hashed, and each stage's node hashes
//! its content with the nodes it was made from: a small Merkle DAG whose
//! root is stored with the answer. [`check`] recomputes every stage from
//! the record's own question, evidence and answer, and every passage's
//! Merkle proof against its book's root, with nothing but the record.

use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::claims::parse_answer;
use super::prompt::{check_question, line_drafts, line_messages};
use super::render::render;
use super::{
    ASK_FORMAT, ASK_FORMAT_V1, AskRecord, Evidence, Policy, Scope, Verification, evidence_id,
    verify,
};
use crate::merkle::{self, Hash, ProofStep};
use crate::moot::verify::chunk_label;

/// A passage's inclusion proof against its book's root (`merkle-v1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassageProof {
    /// The book's root, hex, and its chunk count.
    pub root: String,
    pub count: u64,
    pub steps: Vec<ProofStepRecord>,
}

/// One proof step: the sibling (hex) and whether it stands on the left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProofStepRecord {
    pub sibling: String,
    pub left: bool,
}

impl PassageProof {
    pub fn new(root: &Hash, count: u64, steps: &[ProofStep]) -> PassageProof {
        PassageProof {
            root: hex::encode(root),
            count,
            steps: steps
                .iter()
                .map(|s| ProofStepRecord {
                    sibling: hex::encode(s.sibling),
                    left: s.is_left,
                })
                .collect(),
        }
    }

    /// The book's root, when it is 32 bytes of hex.
    pub fn root_hash(&self) -> Option<Hash> {
        hash_of(&self.root)
    }

    /// Checks that `text` is chunk `index` under this proof; returns the
    /// root and the leaf.
    pub fn check(&self, text: &str, index: u64) -> Result<(Hash, Hash), String> {
        let root = self.root_hash().ok_or("its root is not 32 bytes of hex")?;
        let steps = self
            .steps
            .iter()
            .map(|s| {
                hash_of(&s.sibling).map(|sibling| ProofStep {
                    sibling,
                    is_left: s.left,
                })
            })
            .collect::<Option<Vec<_>>>()
            .ok_or("a proof sibling is not 32 bytes of hex")?;
        let leaf = merkle::leaf_hash(text.as_bytes());
        merkle::verify(&leaf, index, self.count, &steps, &root).map_err(|e| e.to_string())?;
        Ok((root, leaf))
    }
}

fn hash_of(s: &str) -> Option<Hash> {
    hex::decode(s).ok()?.try_into().ok()
}

/// The stored DAG: every stage's content hash and node hash, and the root
/// over all nodes (empty until [`run_record`] fills it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    pub root: String,
    pub stages: Vec<StageRecord>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageRecord {
    pub name: String,
    /// SHA-256 of the stage's content.
    pub hash: String,
    /// SHA-256 of the content hash and the parents' nodes, in order.
    pub node: String,
    pub parents: Vec<String>,
}

/// The stages in order, each with the stages it is made from.
const STAGES: [(&str, &[&str]); 9] = [
    ("question", &[]),
    ("retrieval", &["question"]),
    ("evidence", &["retrieval"]),
    ("prompt", &["question", "evidence"]),
    ("raw-answer", &["prompt"]),
    ("claims", &["raw-answer"]),
    ("verification", &["question", "claims", "evidence"]),
    ("rendering", &["verification", "evidence"]),
    ("label", &["verification"]),
];

/// The run record of `r` as it stands (its verification included): what
/// an ask stores and what [`check`] recomputes.
pub fn run_record(r: &AskRecord) -> RunRecord {
    let hits: Vec<_> = r
        .evidence
        .iter()
        .map(|e| json!({"book": e.book, "index": e.index, "leaf": hex::encode(merkle::leaf_hash(e.text.as_bytes()))}))
        .collect();
    let chat = |e: &Evidence, quote: Option<&str>| {
        line_messages(&r.question, e, quote)
            .iter()
            .map(|m| json!({"role": m.role.as_str(), "content": m.content}))
            .collect::<Vec<_>>()
    };
    // Each line's prompt (`ask-v1`), or each line's drafts' prompts.
    let prompts: Vec<_> = r
        .evidence
        .iter()
        .map(|e| match r.format.as_str() {
            ASK_FORMAT_V1 => json!(chat(e, None)),
            _ => json!(
                line_drafts(&r.question, e, r.guided)
                    .into_iter()
                    .map(|quote| chat(e, quote))
                    .collect::<Vec<_>>()
            ),
        })
        .collect();
    let contents = [
        json!(r.question),
        // A mesh ask's anchor is part of how it retrieved (absent from a
        // local ask's, whose stage reads as it always did).
        match &r.mesh {
            None => json!({"books": r.books, "k": r.settings.k, "hits": hits}),
            Some(m) => json!({"books": r.books, "k": r.settings.k, "hits": hits, "mesh": m}),
        },
        json!(r.evidence),
        json!({"model": r.model, "guided": r.guided, "settings": r.settings, "lines": prompts}),
        json!(r.answer),
        json!(parse_answer(&r.answer)),
        json!(r.verification),
        json!(render(r)),
        json!({"label": r.verification.label, "rung": r.verification.rung}),
    ];
    let mut stages: Vec<StageRecord> = Vec::new();
    let mut nodes: Vec<Hash> = Vec::new();
    let mut all = Sha256::new();
    all.update(b"grove-ask-run-v1\0");
    for ((name, parents), content) in STAGES.iter().zip(contents) {
        let mut h = Sha256::new();
        h.update(b"grove-ask-stage-v1\0");
        h.update(name.as_bytes());
        h.update([0]);
        h.update(serde_json::to_vec(&content).unwrap_or_default());
        let hash: Hash = h.finalize().into();
        let mut n = Sha256::new();
        n.update(b"grove-ask-node-v1\0");
        n.update(hash);
        for p in *parents {
            if let Some(i) = stages.iter().position(|s| s.name == *p) {
                n.update(nodes[i]);
            }
        }
        let node: Hash = n.finalize().into();
        all.update(node);
        nodes.push(node);
        stages.push(StageRecord {
            name: name.to_string(),
            hash: hex::encode(hash),
            node: hex::encode(node),
            parents: parents.iter().map(|p| p.to_string()).collect(),
        });
    }
    RunRecord {
        root: hex::encode(all.finalize()),
        stages,
    }
}

/// Checks a record offline: its question, every passage's proof and
/// content id, the verification recomputed, every stage's hash and the
/// run's root. `Ok(root)` when all agree; else every disagreement.
pub fn check(r: &AskRecord) -> Result<String, Vec<String>> {
    let mut problems = Vec::new();
    if r.format != ASK_FORMAT && r.format != ASK_FORMAT_V1 {
        problems.push(format!(
            "format {:?}, not {ASK_FORMAT} or {ASK_FORMAT_V1}",
            r.format
        ));
    }
    let Some(policy) = Policy::named(&r.policy) else {
        return Err(vec![format!(
            "verifier policy {:?} is not known here",
            r.policy
        )]);
    };
    match check_question(&r.question) {
        Ok(q) if q == r.question => {}
        Ok(_) => problems.push("the question is not in its checked form".into()),
        Err(e) => problems.push(format!("the question: {e}")),
    }
    for (i, e) in r.evidence.iter().enumerate() {
        problems.extend(check_evidence(i, e));
    }
    let recomputed = recompute(r, policy);
    if recomputed != r.verification {
        problems.push("the verification does not follow from the answer and the evidence".into());
    }
    let run = run_record(&AskRecord {
        verification: recomputed,
        ..r.clone()
    });
    // A stage whose own content changed is named; the nodes after it
    // differ through it and are not named again.
    for (stored, fresh) in r.run.stages.iter().zip(&run.stages) {
        if stored.name != fresh.name || stored.parents != fresh.parents {
            problems.push(format!(
                "stage {}: not where the run record has it",
                fresh.name
            ));
        } else if stored.hash != fresh.hash {
            problems.push(format!(
                "stage {}: its content does not match its hash",
                fresh.name
            ));
        }
    }
    if r.run.stages.len() != run.stages.len() {
        problems.push(format!(
            "{} stages recorded, {} expected",
            r.run.stages.len(),
            run.stages.len()
        ));
    }
    if r.run.root != run.root {
        problems.push("the run's root does not match its stages".into());
    }
    if problems.is_empty() {
        Ok(run.root)
    } else {
        Err(problems)
    }
}

/// The verification of the record's answer, as the verifier gives it
/// under the record's policy.
fn recompute(r: &AskRecord, policy: &Policy) -> Verification {
    let scope = Scope {
        books: (!r.books.is_empty()).then(|| r.books.clone()),
    };
    verify(&r.question, &r.answer, &r.evidence, &scope, policy)
}

fn check_evidence(i: usize, e: &Evidence) -> Vec<String> {
    let mut problems = Vec::new();
    let at = format!("E{}", e.pointer);
    if e.pointer as usize != i + 1 {
        problems.push(format!("{at}: pointers are not E1, E2, … in order"));
    }
    if e.label != chunk_label(e.index) {
        problems.push(format!(
            "{at}: label {} is not chunk {}'s",
            e.label, e.index
        ));
    }
    match (&e.proof, e.proven) {
        (None, true) => problems.push(format!("{at}: marked proven, but it has no proof")),
        (None, false) => {}
        (Some(proof), proven) => match (proof.check(&e.text, e.index), proven) {
            (Err(why), true) => problems.push(format!("{at}: its proof fails: {why}")),
            (Err(_), false) => {}
            (Ok(_), false) => problems.push(format!("{at}: marked unproven, but its proof holds")),
            (Ok((root, leaf)), true) if evidence_id(&root, &leaf) != e.id => {
                problems.push(format!("{at}: its id is not its root and leaf's"))
            }
            (Ok(_), true) => {}
        },
    }
    problems
}
