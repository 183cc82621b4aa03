//! `grove moot verify FILE`: re-checks a transcript, or a moot export (the
//! host's signature, roster, announcements and every signed turn first),
//! offline: no daemon, no network. Where the local store holds a book, its
//! passages are also checked against the stored chunks.

use std::io::{self, Write};
use std::path::Path;

use anyhow::{Context, bail};
use grove::api::dto;
use grove::moot::transcript::TranscriptRecord;
use grove::moot::verify::{ChunkLookup, Mismatch};

use crate::cli::{Ctx, Show};

pub fn verify(
    ctx: &Ctx,
    file: &Path,
    expect_mesh: Option<&str>,
    expect_roster: Option<&str>,
) -> anyhow::Result<()> {
    let mut store = grove::store::Store::new(&ctx.state_dir);
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let report = if is_export(&text) {
        verify_export(file, &text, expect_mesh, expect_roster, &mut store)?
    } else {
        if expect_mesh.is_some() || expect_roster.is_some() {
            bail!("--expect-mesh and --expect-roster apply to moot exports only");
        }
        verify_transcript(file, &text, &mut store)?
    };
    ctx.show(&report)?;
    if !report.ok {
        bail!(
            "{} mismatches in {}",
            report.mismatches.len(),
            file.display()
        );
    }
    Ok(())
}

/// Whether a file is a moot export rather than a plain transcript.
fn is_export(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text)
        .is_ok_and(|v| v["format"] == grove::moot::export::EXPORT_FORMAT)
}

/// A plain transcript: re-graded, re-snapped and hashed from itself alone.
fn verify_transcript(
    file: &Path,
    text: &str,
    store: &mut dyn ChunkLookup,
) -> anyhow::Result<dto::MootVerified> {
    let transcript = TranscriptRecord::from_json(text)
        .with_context(|| format!("reading transcript {}", file.display()))?;
    let mismatches = grove::moot::verify::verify(&transcript, Some(store))?;
    Ok(dto::MootVerified::new(
        file,
        transcript.utterances.len(),
        None,
        &mismatches,
    ))
}

/// An export: the host's signature, the roster and announcements, every
/// signed turn, then the transcript's own re-check.
fn verify_export(
    file: &Path,
    text: &str,
    expect_mesh: Option<&str>,
    expect_roster: Option<&str>,
    store: &mut dyn ChunkLookup,
) -> anyhow::Result<dto::MootVerified> {
    let export: dto::MootExport = serde_json::from_str(text)
        .with_context(|| format!("{}: not a moot export", file.display()))?;
    let (vouched, mut mismatches) = grove::moot::export::verify_signed_export(&export.signed)?;
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
    mismatches.extend(grove::moot::verify::verify(
        &vouched.transcript,
        Some(store),
    )?);
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
    let utterances = vouched.transcript.utterances.len();
    let by = dto::VouchedBy {
        mesh_id: vouched.mesh_id,
        roster_hash: vouched.roster_hash,
        host: vouched.host,
        signed_turns: vouched.turns,
    };
    Ok(dto::MootVerified::new(
        file,
        utterances,
        Some(by),
        &mismatches,
    ))
}

impl Show for dto::MootVerified {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        if let Some(v) = &self.vouched {
            writeln!(
                out,
                "vouched for by mesh {} (roster {}), hosted by {}",
                v.mesh_id, v.roster_hash, v.host
            )?;
        }
        for m in &self.mismatches {
            match m.turn {
                Some(t) => writeln!(out, "MISMATCH turn {t}: {}", m.what)?,
                None => writeln!(out, "MISMATCH {}", m.what)?,
            }
        }
        if !self.ok {
            return Ok(());
        }
        match &self.vouched {
            Some(v) => writeln!(
                out,
                "ok: {} signed turns (signatures, proofs, chain) and {} utterances re-graded, re-snapped and hashed; stats agree",
                v.signed_turns, self.utterances
            ),
            None => writeln!(
                out,
                "ok: {} utterances re-graded, re-snapped and hashed; stats agree",
                self.utterances
            ),
        }
    }
}
