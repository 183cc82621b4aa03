//! An answer for a person to read: each line as written, whether the books
//! hold it up and how (or why not), the slice of its passage that does,
//! then the rung, the label, the warrant and the evidence. The CLI prints
//! it; the run record hashes it (its `rendering` stage).

use std::fmt::Write;

use super::{AskRecord, ClaimVerdict, Evidence, Verification};

/// The text of an answer.
pub fn render(r: &AskRecord) -> String {
    let mut s = String::new();
    // Writing into a String cannot fail.
    let _ = write_answer(&mut s, r);
    s
}

fn write_answer(s: &mut String, r: &AskRecord) -> std::fmt::Result {
    let v = &r.verification;
    writeln!(s, "{}\n", r.question)?;
    if r.evidence.is_empty() {
        writeln!(
            s,
            "No passage of the books asked matches the question: there is nothing to answer from.\n"
        )?;
    }
    for claim in &v.claims {
        render_claim(s, claim, &r.evidence)?;
    }
    writeln!(
        s,
        "{}{}",
        if v.claims.is_empty() { "" } else { "\n" },
        summary(v)
    )?;
    if let Some(line) = warrant_line(v) {
        writeln!(s, "{line}")?;
    }
    writeln!(
        s,
        "model: {}{}",
        r.model,
        if r.guided { ", guided" } else { "" }
    )?;
    if !r.evidence.is_empty() {
        writeln!(s, "\nevidence:")?;
        for e in &r.evidence {
            // A mesh ask's passages say whose book they are.
            let held = match &e.holder {
                Some(peer) => format!("  held by …{}", tail(peer, 10)),
                None => String::new(),
            };
            writeln!(
                s,
                "  E{:<3} {}, {}  id {}…  {}{held}",
                e.pointer,
                e.book,
                e.label,
                &e.id[..12.min(e.id.len())],
                e.title
            )?;
        }
    }
    if let Some(mesh) = &r.mesh {
        writeln!(
            s,
            "mesh {}: every passage's root as its holder announced it, the roster from the genesis (grove ask verify --expect-mesh)",
            mesh.mesh_id
        )?;
    }
    Ok(())
}

/// The answer's rung and label in words, with how many lines held up.
pub fn summary(v: &Verification) -> String {
    format!(
        "rung {} of 4, {}: {} ({}; {} of {} lines held up{})",
        v.rung.number(),
        v.rung.name(),
        v.rung.describe(),
        v.label.as_str(),
        v.supported,
        v.lines,
        match v.unsourced {
            0 => String::new(),
            n => format!(", {n} without a pointer"),
        }
    )
}

/// The question's warrant and whether it holds, when it has one.
pub fn warrant_line(v: &Verification) -> Option<String> {
    let class = v.warrant?.as_str().replace('-', " ");
    Some(match &v.warrant_violation {
        _ if !v.warrant_checked => {
            format!("warrant ({class}): not checked, no claim passed its checks")
        }
        None => format!("warrant ({class}): holds"),
        Some(violation) => format!("warrant: {}", violation.describe()),
    })
}

/// A claim's verdict in words: held up and how, or why not.
pub fn claim_verdict(c: &ClaimVerdict) -> String {
    match (&c.support, c.violations.first()) {
        _ if !c.sourced => "not held up: it cites no passage".to_string(),
        (Some(how), None) => format!("held up ({})", how.as_str()),
        (Some(how), Some(v)) => format!("held up ({}); but {}", how.as_str(), v.describe()),
        (None, Some(v)) => format!("not held up: {}", v.describe()),
        (None, None) => "not held up: its passages do not say this closely enough".to_string(),
    }
}

/// One claim: its line, its verdict in words, and the slice of its passage
/// that holds it up.
fn render_claim(s: &mut String, c: &ClaimVerdict, evidence: &[Evidence]) -> std::fmt::Result {
    writeln!(s, "{:>3}  {}", c.line, c.raw)?;
    writeln!(s, "     {}", claim_verdict(c))?;
    if let Some(slice) = &c.slice
        && let Some(e) = evidence.iter().find(|e| e.pointer == slice.pointer)
        && let Some(text) = e.text.get(slice.start..slice.end)
    {
        let before = if slice.start > 0 { "…" } else { "" };
        let after = if slice.end < e.text.len() { "…" } else { "" };
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        writeln!(s, "     E{} {}: {before}{text}{after}", e.pointer, e.book)?;
    }
    Ok(())
}

/// The last `n` characters of `s`.
fn tail(s: &str, n: usize) -> &str {
    let start = s.char_indices().rev().nth(n - 1).map_or(0, |(i, _)| i);
    &s[start..]
}
