//! `grove moot verify FILE`: re-checks a transcript, or a moot export (the
//! host's signature, the membership chain from the genesis to its roster,
//! announcements and every signed turn first), offline: no daemon, no
//! network. Where the local store holds a book, its passages are also
//! checked against the stored chunks. Exit status (docs/moot.md): 0 valid
//! and anchored (or a plain transcript that checks), 3 a valid export that
//! nothing the reader pinned anchors, 1 invalid.

use std::io::{self, Write};
use std::path::Path;

use anyhow::{Context, bail};
use grove::api::dto;

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
    let verdict =
        grove::moot::export::verify_file(&text, expect_mesh, expect_roster, Some(&mut store))
            .with_context(|| format!("checking {}", file.display()))?;
    let report = dto::MootVerified::new(file, verdict);
    ctx.show(&report)?;
    if !report.ok {
        bail!(
            "{} mismatches in {}",
            report.mismatches.len(),
            file.display()
        );
    }
    if report.vouched.as_ref().is_some_and(|v| !v.anchored) {
        return Err(crate::cli::Unanchored.into());
    }
    Ok(())
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
            Some(v) => {
                let chain = match v.chain.as_str() {
                    "none" => "no membership chain".to_string(),
                    kind => format!("a {kind} membership chain of {} epochs", v.chain_epochs),
                };
                writeln!(
                    out,
                    "ok: {} signed turns (signatures, proofs, turn chain), {chain} and {} utterances re-graded, re-snapped and hashed; stats agree",
                    v.signed_turns, self.utterances
                )?;
                match &v.unanchored {
                    Some(why) => writeln!(out, "UNANCHORED: {why}"),
                    None => writeln!(out, "anchored: the pinned value holds"),
                }
            }
            None => writeln!(
                out,
                "ok: {} utterances re-graded, re-snapped and hashed; stats agree",
                self.utterances
            ),
        }
    }
}
