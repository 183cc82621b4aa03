//! The verify page `/verify`: a reader picks or drops an exported
//! transcript, `verify.js` posts it to `/verify`, and the verdict shown is
//! the one `grove moot verify` prints, from the same function
//! (`moot::export::verify_file`).

use std::fmt::Write;

use crate::moot::export::{ChainStatus, FileError, FileVerdict};

use super::html::{esc, short_hex};

pub fn page() -> String {
    let body = "<h1>Verify a moot export</h1>\
        <p>Pick or drop a file written by <code>grove moot export</code> (or a transcript). \
        It is checked by this node with the same code as <code>grove moot verify</code>: \
        the host's signature, the membership chain from the mesh's genesis to its roster, the announcements, every signed turn and its proofs, \
        then every utterance re-graded.</p>\
        <form id=\"verify-form\" class=\"drop\"><label for=\"file\">Export file</label>\
        <input type=\"file\" id=\"file\" name=\"file\" accept=\".json,application/json\">\
        <p class=\"hint\">…or drop it anywhere on this box.</p></form>\
        <div id=\"verdict\" role=\"status\" aria-live=\"polite\"></div>\
        <noscript><p>Checking a file here needs JavaScript; <code>grove moot verify FILE</code> runs the same check.</p></noscript>";
    super::html::page("Verify", body, &["verify.js"])
}

/// The verdict as an HTML fragment.
pub fn verdict(name: &str, result: &Result<FileVerdict, FileError>) -> String {
    let mut out = String::new();
    match result {
        Err(e) => {
            let _ = write!(
                out,
                "<section class=\"verdict bad\" data-ok=\"false\"><h2>✗ {} cannot be checked</h2><p>{}</p></section>",
                esc(name),
                esc(&e.to_string())
            );
        }
        Ok(v) if v.mismatches.is_empty() => {
            let _ = write!(
                out,
                "<section class=\"verdict good\" data-ok=\"true\"><h2>✓ {} verifies</h2><p>",
                esc(name)
            );
            match &v.vouched {
                Some(by) => {
                    let _ = write!(
                        out,
                        "{} signed turns (signatures, proofs, turn chain) and {} utterances re-graded, re-snapped and hashed; stats agree.</p>",
                        by.signed_turns, v.utterances
                    );
                }
                None => {
                    let _ = write!(
                        out,
                        "{} utterances re-graded, re-snapped and hashed; stats agree.</p>",
                        v.utterances
                    );
                }
            }
            vouched(&mut out, v);
            out.push_str("</section>");
        }
        Ok(v) => {
            let _ = write!(
                out,
                "<section class=\"verdict bad\" data-ok=\"false\"><h2>✗ {} does not verify: {} {}</h2>",
                esc(name),
                v.mismatches.len(),
                if v.mismatches.len() == 1 {
                    "mismatch"
                } else {
                    "mismatches"
                }
            );
            vouched(&mut out, v);
            out.push_str("<ul class=\"mismatches\">");
            for m in &v.mismatches {
                match m.turn {
                    Some(t) => {
                        let _ = write!(
                            out,
                            "<li data-turn=\"{t}\"><strong>Turn {t}</strong>: {}</li>",
                            esc(&m.what)
                        );
                    }
                    None => {
                        let _ = write!(
                            out,
                            "<li><strong>Whole file</strong>: {}</li>",
                            esc(&m.what)
                        );
                    }
                }
            }
            out.push_str("</ul></section>");
        }
    }
    out
}

fn vouched(out: &mut String, v: &FileVerdict) {
    if let Some(by) = &v.vouched {
        let _ = write!(
            out,
            "<p>Vouched for by mesh {} (roster {}), hosted by {}.</p>",
            short_hex(&by.mesh_id),
            short_hex(&by.roster_hash),
            short_hex(&by.host)
        );
        // The page pins nothing: say what the reader must compare.
        let chain = match by.chain {
            ChainStatus::SelfCertified { epochs } => format!(
                "Its membership chain replays from the genesis that mesh id <code>{}</code> is the hash of, \
                 through {epochs} epochs: compare that id with the one your mesh shows \
                 (<code>grove mesh status</code>), or run <code>grove moot verify FILE \
                 --expect-mesh {}</code>.",
                esc(&by.mesh_id),
                esc(&by.mesh_id)
            ),
            weak => format!(
                "⚠ Unanchored: {}. Compare roster <code>{}</code> with the one your mesh shows.",
                esc(weak.weakness().unwrap_or_default()),
                esc(&by.roster_hash)
            ),
        };
        let _ = write!(out, "<p class=\"anchor\">{chain}</p>");
    }
}
