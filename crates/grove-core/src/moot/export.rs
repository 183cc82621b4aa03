//! Offline verification of an exported cross-node moot. Pure: from the
//! export alone it checks the host's signature over everything, the
//! membership chain from the mesh's genesis to the roster that vouches for
//! every key (version 2: replayed commit by commit, docs/mesh-protocol.md
//! §3a), the announcements that vouch for every book root, each signed
//! turn (its signer in the roster of the epoch it signed at, announced
//! root, every proof, the chain of previous-turn hashes) and that each
//! signed utterance is exactly the one in the transcript; the transcript
//! itself is then re-graded by [`super::verify::verify`].

use prost::Message;

use super::signed::{self, Expect, GENESIS_PREV};
use super::transcript::RecordError;
use super::transcript::{TranscriptRecord, UtteranceRecord};
use super::verify::{ChunkLookup, Mismatch};
use crate::announce;
use crate::identity;
use crate::merkle::Hash;
use crate::mesh::codec;
use crate::mesh::roster::Roster;
use crate::mesh::state::{Anchor, VerifiedChain, verify_chain};
use crate::wire::mesh::Signed;
use crate::wire::moot as wire;

/// Domain tag of the host's signature on an export.
pub const EXPORT_TAG: &[u8] = b"grove-moot/v1/export\0";
/// Format name of an exported moot.
pub const EXPORT_FORMAT: &str = "grove-moot-export";
/// The export format version written: 2 carries the membership chain
/// (version 1 exports still verify, as unanchored by a mesh id).
pub const EXPORT_VERSION: u32 = 2;

/// What the export vouches with: the reader's trust anchor.
#[derive(Debug, Clone)]
pub struct Vouched {
    pub mesh_id: String,
    pub roster_hash: String,
    pub host: String,
    pub transcript: TranscriptRecord,
    pub turns: usize,
    pub chain: ChainStatus,
}

/// What ties an export's roster to its mesh id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainStatus {
    /// The genesis hashes to the mesh id and the chain replays from it to
    /// the export's roster (`epochs` rosters): pinning the id pins every
    /// member and key.
    SelfCertified { epochs: usize },
    /// The chain replays, but from a genesis of a mesh made before
    /// self-certifying ids: its random id could be claimed by any genesis.
    LegacyId { epochs: usize },
    /// No chain (a version 1 export, or a host that joined before welcomes
    /// carried the chain): the roster stands on the host's word.
    NoChain,
}

impl ChainStatus {
    /// Whether pinning the mesh id pins the roster.
    pub fn id_is_anchor(self) -> bool {
        matches!(self, ChainStatus::SelfCertified { .. })
    }

    /// Why the mesh id alone is not an anchor, for the reader.
    pub fn weakness(self) -> Option<&'static str> {
        match self {
            ChainStatus::SelfCertified { .. } => None,
            ChainStatus::LegacyId { .. } => Some(
                "its mesh id is a legacy random id, not a hash of its genesis: any host could claim it",
            ),
            ChainStatus::NoChain => Some(
                "it carries no membership chain (version 1, or a host that joined before chains were kept): its roster stands on the host's word",
            ),
        }
    }
}

/// Why an export cannot be checked at all (as opposed to mismatches).
#[derive(Debug, Clone, thiserror::Error)]
pub enum ExportError {
    #[error("export: {0}")]
    Invalid(String),
}

fn mismatch(turn: Option<u32>, what: impl Into<String>) -> Mismatch {
    Mismatch {
        turn,
        what: what.into(),
    }
}

/// Checks the signed export (hex of `Signed { ExportBody }`). Returns what
/// vouches for it and every mismatch found in the signed turns.
pub fn verify_signed_export(signed_hex: &str) -> Result<(Vouched, Vec<Mismatch>), ExportError> {
    let export = open_export(signed_hex)?;
    let mut mismatches = Vec::new();
    check_announcements(&export, &mut mismatches);
    check_signed_turns(&export, &mut mismatches);
    let chain = match &export.chain {
        Some(c) if c.anchor == Anchor::Genesis => ChainStatus::SelfCertified { epochs: c.epochs() },
        Some(c) => ChainStatus::LegacyId { epochs: c.epochs() },
        None => ChainStatus::NoChain,
    };
    let OpenedExport {
        body,
        roster,
        transcript,
        ..
    } = export;
    Ok((
        Vouched {
            mesh_id: hex::encode(roster.mesh_id),
            roster_hash: hex::encode(roster.hash()),
            host: identity::peer_id_text(&body.host),
            turns: body.turns.len(),
            transcript,
            chain,
        },
        mismatches,
    ))
}

/// An export whose host signature, roster, chain and transcript all read.
struct OpenedExport {
    body: wire::ExportBody,
    /// The roster of the epoch the export was made in.
    roster: Roster,
    /// The chain from the genesis to `roster`, when the export carries it.
    chain: Option<VerifiedChain>,
    transcript: TranscriptRecord,
}

impl OpenedExport {
    /// The roster a turn's signer is checked against: that of the epoch
    /// the speaker signed at, when the chain reaches it; the export's
    /// roster for a turn without an epoch or an export without a chain.
    fn roster_of_turn(&self, turn: &Signed) -> Result<&Roster, String> {
        let epoch = wire::TurnPayload::decode(turn.body.as_slice())
            .ok()
            .and_then(|p| p.epoch);
        match (&self.chain, epoch) {
            (Some(chain), Some(e)) => chain.at(e).ok_or_else(|| {
                format!(
                    "signed at epoch {e}, after the export's roster (epoch {})",
                    self.roster.epoch
                )
            }),
            _ => Ok(&self.roster),
        }
    }

    /// The rosters an announcement may be vouched for by: the export's and,
    /// with a chain, every earlier one (a member that has since left
    /// announced its book while it was in).
    fn rosters(&self) -> Vec<&Roster> {
        match &self.chain {
            Some(chain) => (0..chain.epochs() as u64)
                .rev()
                .filter_map(|e| chain.at(e))
                .collect(),
            None => vec![&self.roster],
        }
    }
}

/// Decodes the export and checks what vouches for it as a whole: the
/// host's signature, the roster (of this mesh, with the host a member)
/// and that the transcript reads.
fn open_export(signed_hex: &str) -> Result<OpenedExport, ExportError> {
    let invalid = |what: String| ExportError::Invalid(what);
    let bytes =
        hex::decode(signed_hex.trim()).map_err(|_| invalid("`signed` is not hex".into()))?;
    let outer = Signed::decode(bytes.as_slice())
        .map_err(|e| invalid(format!("`signed` does not decode: {e}")))?;
    let (body, host_key) = codec::open_signed::<wire::ExportBody>(&outer, EXPORT_TAG, "export")
        .map_err(|e| invalid(format!("the host's signature: {e}")))?;
    let roster = Roster::decode(&body.roster).map_err(|e| invalid(format!("roster: {e}")))?;
    if roster.mesh_id.as_slice() != body.mesh_id.as_slice() {
        return Err(invalid("the roster is of another mesh".into()));
    }
    let chain = export_chain(&body, &roster)?;
    if roster.member_with_key(&body.host, &host_key).is_none() {
        return Err(invalid(
            "the host that signed the export is not a member of its roster".into(),
        ));
    }
    let transcript = TranscriptRecord::from_json(&body.transcript)
        .map_err(|e| invalid(format!("transcript: {e}")))?;
    Ok(OpenedExport {
        body,
        roster,
        chain,
        transcript,
    })
}

/// The export's membership chain, replayed from its genesis: it must end
/// at exactly the export's roster (a member no commit added, or a key no
/// commit bound, makes another roster), of the export's mesh.
fn export_chain(
    body: &wire::ExportBody,
    roster: &Roster,
) -> Result<Option<VerifiedChain>, ExportError> {
    if body.genesis.is_empty() {
        return Ok(None);
    }
    let chain = verify_chain(&body.genesis, &body.chain)
        .map_err(|e| ExportError::Invalid(format!("the membership chain: {e}")))?;
    if chain.mesh_id() != roster.mesh_id {
        return Err(ExportError::Invalid(format!(
            "the membership chain is of mesh {}, not the roster's {}",
            hex::encode(chain.mesh_id()),
            hex::encode(roster.mesh_id)
        )));
    }
    let tip = chain.tip();
    if tip.hash() != roster.hash() {
        return Err(ExportError::Invalid(format!(
            "the export's roster (epoch {}, {} members) is not the one its membership chain \
             reaches (epoch {}, {} members): no commit made it",
            roster.epoch,
            roster.members.len(),
            tip.epoch,
            tip.members.len()
        )));
    }
    Ok(Some(chain))
}

/// A book root a member vouched for in a signed announcement.
struct AnnouncedRoot {
    peer_id: Vec<u8>,
    book: String,
    root: Hash,
    count: u64,
}

/// Every announcement must be vouched for by a roster of the export (see
/// [`OpenedExport::rosters`], newest first); one that is not is a
/// mismatch, with what the newest roster found wrong.
fn check_announcements(export: &OpenedExport, mismatches: &mut Vec<Mismatch>) {
    let rosters = export.rosters();
    for a in &export.body.announcements {
        let mut newest_error = None;
        let vouched = rosters.iter().any(|r| match announce::verify(a, r) {
            Ok(_) => true,
            Err(e) => {
                newest_error.get_or_insert(e);
                false
            }
        });
        if let (false, Some(e)) = (vouched, newest_error) {
            mismatches.push(mismatch(None, format!("an announcement: {e}")));
        }
    }
}

/// The roots each member of `roster` vouched for in a signed announcement.
fn announced_roots(announcements: &[Signed], roster: &Roster) -> Vec<AnnouncedRoot> {
    let mut announced = Vec::new();
    for ann in announcements
        .iter()
        .filter_map(|a| announce::verify(a, roster).ok())
    {
        for book in ann.shards.iter().flat_map(|s| s.books.iter()) {
            if let Ok(root) = <Hash>::try_from(book.root.as_slice()) {
                announced.push(AnnouncedRoot {
                    peer_id: ann.peer_id.clone(),
                    book: book.key.clone(),
                    root,
                    count: book.count,
                });
            }
        }
    }
    announced
}

/// Every signed turn, in order along the chain of previous-turn hashes:
/// one for each utterance, each checked by [`signed_turn_problem`].
fn check_signed_turns(export: &OpenedExport, mismatches: &mut Vec<Mismatch>) {
    let (turns, utterances) = (&export.body.turns, &export.transcript.utterances);
    if turns.len() != utterances.len() {
        mismatches.push(mismatch(
            None,
            format!(
                "{} signed turns for {} utterances",
                turns.len(),
                utterances.len()
            ),
        ));
    }
    let mut prev: [u8; 32] = GENESIS_PREV;
    // The roots each roster vouches for, worked out once per epoch.
    let mut roots_by_epoch = std::collections::BTreeMap::new();
    for (i, (turn, recorded)) in turns.iter().zip(utterances).enumerate() {
        let n = i as u32 + 1;
        if let Some(what) =
            signed_turn_problem(export, &mut roots_by_epoch, n, &prev, turn, recorded)
        {
            mismatches.push(mismatch(Some(n), what));
        }
        prev = signed::turn_hash(turn);
    }
}

/// What is wrong with signed turn `n`, if anything: its signer must be a
/// member of the roster of the epoch it signed at, the turn must pass
/// [`signed::check`] against the roots that member announced for the book
/// (vouched for by that roster), and the utterance it signs must be the
/// transcript's.
fn signed_turn_problem(
    export: &OpenedExport,
    roots_by_epoch: &mut std::collections::BTreeMap<u64, Vec<AnnouncedRoot>>,
    n: u32,
    prev: &[u8; 32],
    turn: &Signed,
    recorded: &UtteranceRecord,
) -> Option<String> {
    let roster = match export.roster_of_turn(turn) {
        Ok(r) => r,
        Err(what) => return Some(what),
    };
    let Some(member) = roster
        .members
        .iter()
        .find(|m| m.ed25519.as_slice() == turn.signer.as_slice())
    else {
        return Some(format!(
            "signed by a key that is not a member of the roster of epoch {}",
            roster.epoch
        ));
    };
    let roots: Vec<(Hash, u64)> = roots_by_epoch
        .entry(roster.epoch)
        .or_insert_with(|| announced_roots(&export.body.announcements, roster))
        .iter()
        .filter(|a| a.peer_id == member.peer_id && a.book == recorded.speaker)
        .map(|a| (a.root, a.count))
        .collect();
    let expect = Expect {
        moot_id: &export.body.moot_id,
        turn: n,
        prev_hash: prev,
        book: &recorded.speaker,
        signer: &member.ed25519,
        roots: &roots,
    };
    match signed::check(turn, &expect) {
        Ok(checked) => (&UtteranceRecord::from(&checked.utterance) != recorded).then(|| {
            format!(
                "the transcript's utterance differs from the one {} signed",
                identity::peer_id_text(&member.peer_id)
            )
        }),
        Err(e) => Some(format!("signed turn: {e}")),
    }
}

/// Who vouches for a checked export, as `grove moot verify` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VouchedSummary {
    pub mesh_id: String,
    pub roster_hash: String,
    pub host: String,
    pub signed_turns: usize,
    pub chain: ChainStatus,
    /// What the reader pinned that holds: `--expect-mesh` on a
    /// self-certifying id, or `--expect-roster`. `None`: the export is
    /// valid but nothing the reader holds anchors it.
    pub anchored_by: Option<String>,
}

impl VouchedSummary {
    /// Why the export is not anchored, for the reader, when it is not.
    pub fn unanchored_because(&self) -> Option<String> {
        if self.anchored_by.is_some() {
            return None;
        }
        Some(match self.chain.weakness() {
            Some(weak) => format!(
                "mesh {} is trusted as the export names it, and {weak}; pin its roster with --expect-roster {}",
                self.mesh_id, self.roster_hash
            ),
            None => format!(
                "mesh {} is trusted as the export names it; pin it with --expect-mesh {}",
                self.mesh_id, self.mesh_id
            ),
        })
    }
}

/// The verdict on a transcript or export file: what `grove moot verify`
/// prints and the web page's verify route shows, from this one function.
#[derive(Debug, Clone)]
pub struct FileVerdict {
    pub utterances: usize,
    /// Set for an export (absent for a plain transcript).
    pub vouched: Option<VouchedSummary>,
    /// Empty when the file checks out.
    pub mismatches: Vec<Mismatch>,
}

/// Why a file could not be checked at all.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("--expect-mesh and --expect-roster apply to moot exports only")]
    ExpectOnTranscript,
    #[error("not a moot export: {0}")]
    NotExport(String),
    #[error("reading transcript: {0}")]
    Transcript(#[from] RecordError),
    #[error(transparent)]
    Export(#[from] ExportError),
}

/// The readable parts of an export file beside the signed body.
#[derive(serde::Deserialize)]
struct ExportFile {
    mesh_id: String,
    roster_hash: String,
    transcript: TranscriptRecord,
    signed: String,
}

/// Whether a file's text is a moot export rather than a plain transcript.
pub fn is_export(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| v["format"] == EXPORT_FORMAT)
}

/// Checks a transcript or export file's text: an export's host signature,
/// roster, announcements and every signed turn first, then the
/// transcript's re-grading ([`super::verify::verify`]); where `store`
/// holds a book, its passages are also checked against the stored chunks.
pub fn verify_file(
    text: &str,
    expect_mesh: Option<&str>,
    expect_roster: Option<&str>,
    store: Option<&mut dyn ChunkLookup>,
) -> Result<FileVerdict, FileError> {
    if !is_export(text) {
        if expect_mesh.is_some() || expect_roster.is_some() {
            return Err(FileError::ExpectOnTranscript);
        }
        let transcript = TranscriptRecord::from_json(text)?;
        let mismatches = super::verify::verify(&transcript, store)?;
        return Ok(FileVerdict {
            utterances: transcript.utterances.len(),
            vouched: None,
            mismatches,
        });
    }
    let export: ExportFile =
        serde_json::from_str(text).map_err(|e| FileError::NotExport(e.to_string()))?;
    let (vouched, mut mismatches) = verify_signed_export(&export.signed)?;
    let whole = |what: String| Mismatch { turn: None, what };
    if export.transcript != vouched.transcript {
        mismatches.push(whole(
            "the readable transcript differs from the signed one".into(),
        ));
    }
    if export.mesh_id != vouched.mesh_id || export.roster_hash != vouched.roster_hash {
        mismatches.push(whole(
            "the mesh id or roster hash shown differs from the signed roster".into(),
        ));
    }
    mismatches.extend(super::verify::verify(&vouched.transcript, store)?);
    if let Some(m) = expect_mesh
        && m != vouched.mesh_id
    {
        mismatches.push(whole(format!(
            "vouched for by mesh {}, not {m}",
            vouched.mesh_id
        )));
    }
    if let Some(r) = expect_roster
        && r != vouched.roster_hash
    {
        mismatches.push(whole(format!(
            "vouched for by roster {}, not {r}",
            vouched.roster_hash
        )));
    }
    // A pinned roster hash anchors any export (it fixes every member's
    // keys); a pinned mesh id only one whose genesis hashes to it.
    let anchored_by = match (expect_mesh, expect_roster) {
        (_, Some(r)) => Some(format!("roster {r}")),
        (Some(m), None) if vouched.chain.id_is_anchor() => Some(format!("mesh {m}")),
        _ => None,
    };
    Ok(FileVerdict {
        utterances: vouched.transcript.utterances.len(),
        vouched: Some(VouchedSummary {
            mesh_id: vouched.mesh_id,
            roster_hash: vouched.roster_hash,
            host: vouched.host,
            signed_turns: vouched.turns,
            chain: vouched.chain,
            anchored_by,
        }),
        mismatches,
    })
}
