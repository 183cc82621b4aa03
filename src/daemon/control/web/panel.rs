//! The proof panels the moot page and the ask page share: a panel's
//! frame (opened by `:target`, with a close link back), a passage with
//! words marked, its proof path, and the signed announcement that vouches
//! for its root.

use std::fmt::Write;

use crate::mesh::roster::Roster;
use crate::wire::mesh::Signed;
use crate::wire::node::Announcement;

use super::html::{esc, utc};
use super::mark::find_words;

/// A signed announcement as the pages show it.
pub struct AnnouncementView {
    pub peer: Vec<u8>,
    pub name: String,
    pub seq: u64,
    pub time_ms: i64,
    pub signature: String,
    /// Whether its signature checks against the roster (None: no roster
    /// here to check it against).
    pub checked: Option<bool>,
    pub books: Vec<(String, Vec<u8>, u64)>,
}

/// The announcements of `list` that decode, each checked against `roster`.
pub fn announcements(list: &[Signed], roster: Option<&Roster>) -> Vec<AnnouncementView> {
    list.iter()
        .filter_map(|s| {
            let verified = roster.and_then(|r| crate::announce::verify(s, r).ok());
            let checked = roster.map(|_| verified.is_some());
            let ann = match verified {
                Some(a) => a,
                None => <Announcement as prost::Message>::decode(s.body.as_slice()).ok()?,
            };
            Some(AnnouncementView {
                peer: ann.peer_id.clone(),
                name: ann.name.clone(),
                seq: ann.seq,
                time_ms: ann.time_ms,
                signature: hex::encode(&s.signature),
                checked,
                books: ann
                    .shards
                    .iter()
                    .flat_map(|sh| sh.books.iter())
                    .map(|b| (b.key.clone(), b.root.clone(), b.count))
                    .collect(),
            })
        })
        .collect()
}

/// A panel's fragment id, heading and badge (its CSS class, label, why).
pub struct Panel<'a> {
    pub id: &'a str,
    pub heading: &'a str,
    pub badge: Option<(&'a str, &'a str, Option<&'a str>)>,
}

/// The opening of a panel: its heading, badge and a close link to `back`
/// (a fragment).
pub fn open_panel(out: &mut String, panel: &Panel<'_>, back: &str) {
    let (id, heading) = (panel.id, panel.heading);
    let _ = write!(
        out,
        "<section class=\"proof\" id=\"{id}\" aria-label=\"{}\"><div class=\"inner\">\
         <a class=\"close\" href=\"{}\" aria-label=\"Close the proof\">Close ✕</a><h3>{}</h3>",
        esc(heading),
        esc(back),
        esc(heading)
    );
    if let Some((class, label, why)) = panel.badge {
        let _ = write!(
            out,
            "<p><span class=\"badge b-{class}\">{}</span>{}</p>",
            esc(label),
            why.map(|w| format!(" {}", esc(w))).unwrap_or_default()
        );
    }
}

/// `text` with `quote`'s words (when found) in `<mark>`.
pub fn marked(out: &mut String, text: &str, quote: Option<&str>) {
    marked_range(out, text, quote.and_then(|q| find_words(text, q)));
}

/// `text` with the byte range `range` (when on character boundaries) in
/// `<mark>`.
pub fn marked_range(out: &mut String, text: &str, range: Option<(usize, usize)>) {
    match range.filter(|&(a, b)| a <= b && text.get(a..b).is_some()) {
        Some((a, b)) => {
            let _ = write!(
                out,
                "{}<mark>{}</mark>{}",
                esc(&text[..a]),
                esc(&text[a..b]),
                esc(&text[b..])
            );
        }
        None => out.push_str(&esc(text)),
    }
}

/// The proof path fact: each sibling hash and its side.
pub fn proof_path(out: &mut String, steps: &[(String, bool)]) {
    out.push_str("<dt>Proof path</dt><dd><ol class=\"path\">");
    for (sibling, left) in steps {
        let side = if *left { "left" } else { "right" };
        let _ = write!(
            out,
            "<li>{side} <code class=\"hash\">{}</code></li>",
            esc(sibling)
        );
    }
    out.push_str("</ol></dd>");
}

/// The announcement fact of a passage panel: who signed the root, and
/// whether the signature checks; `missing` says why there is none.
pub fn announcement_fact(out: &mut String, announcement: Option<&AnnouncementView>, missing: &str) {
    out.push_str("<dt>Announcement</dt><dd>");
    match announcement {
        Some(a) => {
            let _ = write!(
                out,
                "signed by <strong>{}</strong> ({}), seq {}, {}; {}<br>signature <code class=\"hash\">{}</code>",
                esc(&a.name),
                esc(&crate::identity::peer_id_text(&a.peer)),
                a.seq,
                esc(&utc(a.time_ms)),
                match a.checked {
                    Some(true) =>
                        "<span class=\"ok\">✓ its signature checks against the mesh roster</span>",
                    Some(false) =>
                        "<span class=\"fail\">its signature does not check against the mesh roster</span>",
                    None =>
                        "<span class=\"fail\">its signature was not checked (no roster here)</span>",
                },
                esc(&a.signature)
            );
        }
        None => {
            let _ = write!(out, "<span class=\"fail\">{}</span>", esc(missing));
        }
    }
    out.push_str("</dd>");
}
