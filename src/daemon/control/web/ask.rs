//! The ask pages: `/asks` (the form, and the answers this node gave, newest
//! first) and `/asks/ROOT` (one answer: each claim with its verdict and the
//! slice of its passage that holds it up, the rung and label, what the
//! record's own check finds, and a proof panel per passage: the passage
//! with the slices marked, its chunk, content id, leaf hash, proof path,
//! root, holder and, for a mesh ask, the holder's signed announcement).
//! The verdicts' words are the CLI's (`ask::render`).

use std::fmt::Write;

use prost::Message;

use crate::ask::render::{claim_verdict, summary, warrant_line};
use crate::ask::{AskRecord, Evidence, Label, check, check_anchor};
use crate::identity::peer_id_text;
use crate::mesh::roster::Roster;
use crate::store::ask_cache::KeptAnswer;
use crate::wire::mesh::Signed;

use super::html::{esc, page, short_hex, utc};
use super::panel::{
    AnnouncementView, Panel, announcement_fact, announcements, marked_range, open_panel, proof_path,
};

/// The badge class of a label.
fn label_class(label: Label) -> &'static str {
    match label {
        Label::Strict => "verified",
        Label::Hybrid => "snapped",
        Label::Ungrounded => "unverified",
    }
}

/// `/asks`: the form, then the kept answers.
pub fn list_page(recent: &[KeptAnswer], in_mesh: bool) -> String {
    let mut b = String::from("<h1>Ask the books</h1>");
    b.push_str(
        "<form method=\"post\" action=\"/asks\" class=\"start\">\
         <label for=\"question\">Question</label>\
         <input id=\"question\" name=\"question\" maxlength=\"500\" required \
         placeholder=\"Why does Ishmael go to sea?\">",
    );
    if in_mesh {
        b.push_str(
            "<label for=\"scope\">Books</label><select id=\"scope\" name=\"scope\">\
             <option value=\"mesh\">every member's (each passage proven against its holder's root)</option>\
             <option value=\"local\">this node's</option></select>",
        );
    }
    b.push_str(
        "<button type=\"submit\">Ask</button>\
         <p class=\"hint\">One claim line per passage, written by this node's model; \
         every claim is checked against the books (docs/ask.md). An answer takes a few seconds.</p></form>",
    );
    b.push_str("<section aria-labelledby=\"asked-h\"><h2 id=\"asked-h\">Answers given here</h2>");
    if recent.is_empty() {
        b.push_str("<p>None yet.</p>");
    } else {
        b.push_str("<ul class=\"moots\">");
        for a in recent {
            let _ = write!(
                b,
                "<li><a href=\"/asks/{}\">{}</a> <span class=\"badge b-{}\">{}</span> {}{}</li>",
                esc(&a.run_root),
                esc(&a.question),
                label_class(a.label),
                a.label.as_str(),
                if a.mesh { "mesh · " } else { "" },
                esc(&utc(a.stored_ms))
            );
        }
        b.push_str("</ul>");
    }
    b.push_str("</section>");
    page("Ask the books", &b, &[])
}

/// `/asks/ROOT`: one answer and its proofs.
pub fn answer_page(r: &AskRecord, roster: Option<&Roster>) -> String {
    let v = &r.verification;
    let mut b = String::new();
    let _ = write!(
        b,
        "<h1>{}</h1><p><span class=\"badge b-{}\">{}</span> {}</p>",
        esc(&r.question),
        label_class(v.label),
        esc(v.label.as_str()),
        esc(&summary(v))
    );
    if let Some(line) = warrant_line(v) {
        let _ = write!(b, "<p>{}</p>", esc(&line));
    }
    if r.evidence.is_empty() {
        b.push_str(
            "<p>No passage of the books asked matches the question: there is nothing to answer from.</p>",
        );
    }
    b.push_str("<ol class=\"claims\">");
    for c in &v.claims {
        let _ = write!(
            b,
            "<li class=\"turn\" id=\"c{}\"><p class=\"text\">{}</p><p class=\"meta\">{}</p>",
            c.line,
            pointers_linked(&c.raw),
            esc(&claim_verdict(c))
        );
        if let Some(s) = &c.slice
            && let Some(e) = r.evidence.iter().find(|e| e.pointer == s.pointer)
            && let Some(text) = e.text.get(s.start..s.end)
        {
            let _ = write!(
                b,
                "<blockquote class=\"passage\">{}{}{}</blockquote>\
                 <p class=\"meta\">from <a href=\"#e{}\">E{} {}</a></p>",
                if s.start > 0 { "…" } else { "" },
                esc(text),
                if s.end < e.text.len() { "…" } else { "" },
                e.pointer,
                e.pointer,
                esc(&e.book)
            );
        }
        b.push_str("</li>");
    }
    b.push_str("</ol>");
    record_check(&mut b, r);
    evidence_section(&mut b, r, roster);
    page(&r.question, &b, &[])
}

/// The line with each `[En]` pointer a link to its passage's panel.
fn pointers_linked(raw: &str) -> String {
    let mut out = String::new();
    let mut rest = raw;
    while let Some(at) = rest.find("[E") {
        let close = rest[at..].find(']').map(|i| at + i);
        let digits = close.map(|c| &rest[at + 2..c]);
        match (close, digits) {
            (Some(c), Some(d)) if !d.is_empty() && d.chars().all(|ch| ch.is_ascii_digit()) => {
                out.push_str(&esc(&rest[..at]));
                let _ = write!(out, "<a class=\"tag\" href=\"#e{d}\">[E{d}]</a>");
                rest = &rest[c + 1..];
            }
            _ => {
                out.push_str(&esc(&rest[..at + 2]));
                rest = &rest[at + 2..];
            }
        }
    }
    out.push_str(&esc(rest));
    out
}

/// What the record's own offline check finds (the same as `grove ask
/// verify`), and where to get the record.
fn record_check(b: &mut String, r: &AskRecord) {
    b.push_str("<section aria-labelledby=\"check-h\"><h2 id=\"check-h\">The record</h2>");
    match check(r) {
        Ok(root) => {
            let _ = write!(
                b,
                "<p class=\"ok\">✓ every passage's proof, the verification and every stage recomputed; run root {}</p>",
                short_hex(&root)
            );
        }
        Err(problems) => {
            b.push_str("<ul class=\"fail\">");
            for p in problems {
                let _ = write!(b, "<li>{}</li>", esc(&p));
            }
            b.push_str("</ul>");
        }
    }
    if r.mesh.is_some() {
        match check_anchor(r, None) {
            Ok(a) => {
                let _ = write!(
                    b,
                    "<p class=\"ok\">✓ every passage is of a book its holder announced in mesh {}, the roster proven from the genesis ({} {})</p>",
                    short_hex(&a.mesh_id),
                    a.epochs,
                    if a.epochs == 1 { "epoch" } else { "epochs" }
                );
            }
            Err(problems) => {
                for p in problems {
                    let _ = write!(b, "<p class=\"fail\">{}</p>", esc(&p));
                }
            }
        }
    }
    let _ = write!(
        b,
        "<p>Model {}{}. <a href=\"/asks/{}/record\" download=\"answer.json\">The record (JSON)</a>: \
         check it anywhere with <code>grove ask verify answer.json{}</code>.</p></section>",
        esc(&r.model),
        if r.guided { ", guided" } else { "" },
        esc(&r.run.root),
        r.mesh
            .as_ref()
            .map(|m| format!(" --expect-mesh {}", esc(&m.mesh_id)))
            .unwrap_or_default()
    );
}

/// The evidence list and one proof panel per passage.
fn evidence_section(b: &mut String, r: &AskRecord, roster: Option<&Roster>) {
    let signed: Vec<Signed> = r
        .mesh
        .iter()
        .flat_map(|m| m.announcements.iter())
        .filter_map(|h| hex::decode(h).ok())
        .filter_map(|bytes| Signed::decode(bytes.as_slice()).ok())
        .collect();
    let anns = announcements(&signed, roster);
    b.push_str(
        "<section aria-labelledby=\"ev-h\"><h2 id=\"ev-h\">Evidence</h2><ul class=\"moots\">",
    );
    for e in &r.evidence {
        let _ = write!(
            b,
            "<li><a href=\"#e{}\">E{}</a> {} <code>{}</code>{}</li>",
            e.pointer,
            e.pointer,
            esc(if e.title.is_empty() {
                &e.book
            } else {
                &e.title
            }),
            esc(&e.label),
            holder_name(e, roster)
                .map(|n| format!(" · held by {}", esc(&n)))
                .unwrap_or_default()
        );
    }
    b.push_str("</ul>");
    for e in &r.evidence {
        passage_panel(b, r, e, &anns, roster);
    }
    b.push_str("</section>");
}

/// The name of the member holding a mesh ask's passage.
fn holder_name(e: &Evidence, roster: Option<&Roster>) -> Option<String> {
    let holder = e.holder.as_ref()?;
    let name = roster.and_then(|r| {
        r.members
            .iter()
            .find(|m| peer_id_text(&m.peer_id) == *holder)
            .map(|m| m.name.clone())
    });
    Some(match name {
        Some(n) => format!("{n} ({holder})"),
        None => holder.clone(),
    })
}

/// The panel of passage `e`: the passage with every claim's slice of it
/// marked (the first), its facts and proof.
fn passage_panel(
    b: &mut String,
    r: &AskRecord,
    e: &Evidence,
    anns: &[AnnouncementView],
    roster: Option<&Roster>,
) {
    let checked = e.proof.as_ref().map(|p| p.check(&e.text, e.index));
    let (class, label) = match &checked {
        Some(Ok(_)) => ("verified", "proof checks"),
        _ => ("unverified", "not proven"),
    };
    let heading = format!("Passage E{}: {}, {}", e.pointer, e.book, e.label);
    let panel = Panel {
        id: &format!("e{}", e.pointer),
        heading: &heading,
        badge: Some((class, label, None)),
    };
    // Closing goes back to the first claim that cites the passage.
    let back = r
        .verification
        .claims
        .iter()
        .find(|c| c.pointers.contains(&e.pointer))
        .map_or("#ev-h".to_string(), |c| format!("#c{}", c.line));
    open_panel(b, &panel, &back);
    let slice = r
        .verification
        .claims
        .iter()
        .filter_map(|c| c.slice.as_ref())
        .find(|s| s.pointer == e.pointer)
        .map(|s| (s.start, s.end));
    b.push_str("<blockquote class=\"passage\">");
    marked_range(b, &e.text, slice);
    b.push_str("</blockquote><dl class=\"facts\">");
    let _ = write!(
        b,
        "<dt>Book</dt><dd>{} <code>{}</code></dd><dt>Content id</dt><dd><code class=\"hash\">{}</code></dd>",
        esc(&e.title),
        esc(&e.book),
        esc(&e.id)
    );
    if let Some(holder) = holder_name(e, roster) {
        let _ = write!(b, "<dt>Held by</dt><dd>{}</dd>", esc(&holder));
    }
    let leaf = hex::encode(crate::merkle::leaf_hash(e.text.as_bytes()));
    let _ = write!(
        b,
        "<dt>Leaf hash</dt><dd><code class=\"hash\">{}</code></dd>",
        esc(&leaf)
    );
    proof_facts(b, r, e, checked, anns);
    b.push_str("</dl></div></section>");
}

/// A passage's proof facts: the path, the root and its check, and for a
/// mesh ask the holder's announcement that vouches for the root.
fn proof_facts(
    b: &mut String,
    r: &AskRecord,
    e: &Evidence,
    checked: Option<Result<(crate::merkle::Hash, crate::merkle::Hash), String>>,
    anns: &[AnnouncementView],
) {
    match (&e.proof, checked) {
        (Some(p), Some(verdict)) => {
            let steps: Vec<(String, bool)> = p
                .steps
                .iter()
                .map(|s| (s.sibling.clone(), s.left))
                .collect();
            proof_path(b, &steps);
            let verdict = match verdict {
                Ok(_) => {
                    "<span class=\"ok\">✓ the proof checks against this root</span>".to_string()
                }
                Err(why) => format!("<span class=\"fail\">✗ {}</span>", esc(&why)),
            };
            let _ = write!(
                b,
                "<dt>Root</dt><dd><code class=\"hash root\">{}</code> ({} chunks)<br>{verdict}</dd>",
                esc(&p.root),
                p.count
            );
            if r.mesh.is_some() {
                let announced = anns.iter().find(|a| {
                    e.holder.as_deref() == Some(peer_id_text(&a.peer).as_str())
                        && a.books.iter().any(|(key, root, count)| {
                            *key == e.book && hex::encode(root) == p.root && *count == p.count
                        })
                });
                announcement_fact(
                    b,
                    announced,
                    "no announcement in the record vouches for this root",
                );
            }
        }
        _ => b.push_str("<dt>Proof</dt><dd><span class=\"fail\">none</span></dd>"),
    }
}
