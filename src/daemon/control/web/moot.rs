//! The moot page `/moots/ID`: the moot's state and grounding stats, then
//! its turns in speaking order, each quote with a badge of its kind and a
//! proof panel (the passage with the quoted words marked, its chunk label,
//! leaf hash, proof path, the root and the signed announcement it was
//! proven against). Panels open by `:target`, so the page reads without
//! JavaScript; `moot.js` appends turns as the event stream announces them,
//! fetching each one's HTML from [`turn`], the one definition of a turn.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::daemon::moots::book::{Moot, MootState};
use crate::grounding::{Haystack, ParsedReply, SnapAction, Tag, contains, norm};
use crate::merkle::{self, Hash};
use crate::mesh::codec;
use crate::mesh::roster::Roster;
use crate::moot::signed;
use crate::moot::stats::Stats;
use crate::moot::transcript::UtteranceRecord;
use crate::wire::mesh::Signed;
use crate::wire::moot as wire;

use super::html::{esc, short_hex, utc};
use super::panel::{
    AnnouncementView, Panel, announcement_fact, announcements, marked, open_panel, proof_path,
};

/// A passage carried in a signed turn, with its proof checked.
struct ProvenView {
    tag: String,
    label: String,
    node_id: String,
    text: String,
    leaf: String,
    /// (sibling hex, sibling is on the left).
    steps: Vec<(String, bool)>,
    /// `Err(reason)` when the proof does not verify against the turn's root.
    check: Result<(), String>,
    /// The text normalized once, for finding quotes in it.
    hay: Haystack,
}

/// One turn as the page shows it.
pub struct TurnView {
    record: UtteranceRecord,
    node: String,
    peer: String,
    at: Option<i64>,
    ms: Option<u64>,
    root: String,
    count: u64,
    passages: Vec<ProvenView>,
    /// The announcement of the speaker that holds the turn's root.
    announcement: Option<usize>,
    /// Whether that announcement's signature checks against the roster.
    announcement_checked: bool,
    hash: String,
    /// Why the signed turn could not be read, when it could not.
    problem: Option<String>,
}

/// Everything the page draws, read once from the hosted moot.
pub struct MootPage<'a> {
    moot: &'a Moot,
    announcements: Vec<AnnouncementView>,
    pub turns: Vec<TurnView>,
}

impl<'a> MootPage<'a> {
    pub fn new(moot: &'a Moot, roster: Option<&Roster>) -> MootPage<'a> {
        let announcements = announcements(&moot.announcements, roster);
        let turns = moot
            .turns
            .iter()
            .enumerate()
            .map(|(i, s)| turn_view(moot, i, s, roster, &announcements))
            .collect();
        MootPage {
            moot,
            announcements,
            turns,
        }
    }
}

fn member_name(roster: Option<&Roster>, peer: &[u8]) -> String {
    roster
        .and_then(|r| r.member(peer))
        .map(|m| m.name.clone())
        .unwrap_or_else(|| crate::identity::peer_id_text(peer))
}

fn turn_view(
    moot: &Moot,
    index: usize,
    s: &Signed,
    roster: Option<&Roster>,
    anns: &[AnnouncementView],
) -> TurnView {
    let mut view = TurnView {
        record: line_record(moot, index),
        node: String::new(),
        peer: String::new(),
        at: moot
            .view
            .lines
            .get(index)
            .map(|l| l.at)
            .filter(|&at| at > 0),
        ms: moot.view.turn_ms.get(index).copied(),
        root: String::new(),
        count: 0,
        passages: Vec::new(),
        announcement: None,
        announcement_checked: false,
        hash: hex::encode(signed::turn_hash(s)),
        problem: None,
    };
    let payload = match codec::open_signed::<wire::TurnPayload>(s, signed::TURN_TAG, "turn") {
        Ok((payload, _)) => payload,
        Err(e) => {
            view.problem = Some(format!("the signed turn does not check: {e}"));
            return view;
        }
    };
    match serde_json::from_str::<UtteranceRecord>(&payload.utterance) {
        Ok(record) => view.record = record,
        Err(e) => view.problem = Some(format!("the signed utterance does not read: {e}")),
    }
    view.node = member_name(roster, &payload.speaker);
    view.peer = crate::identity::peer_id_text(&payload.speaker);
    view.root = hex::encode(&payload.book_root);
    view.count = payload.book_count;
    view.announcement = anns.iter().position(|a| {
        a.peer == payload.speaker
            && a.books.iter().any(|(k, r, c)| {
                *k == payload.book && *r == payload.book_root && *c == payload.book_count
            })
    });
    view.announcement_checked = view
        .announcement
        .is_some_and(|a| anns[a].checked == Some(true));
    let root: Option<Hash> = payload.book_root.as_slice().try_into().ok();
    view.passages = payload
        .passages
        .iter()
        .map(|p| proven_view(p, &payload, root.as_ref()))
        .collect();
    view
}

/// Turn `index` as the moot's view lists it: what the page shows of a
/// turn whose signed utterance does not read.
fn line_record(moot: &Moot, index: usize) -> UtteranceRecord {
    let line = moot.view.lines.get(index);
    UtteranceRecord {
        turn: index as u32 + 1,
        speaker: line.map(|l| l.key.clone()).unwrap_or_default(),
        title: line.map(|l| l.title.clone()).unwrap_or_default(),
        text: line.map(|l| l.text.clone()).unwrap_or_default(),
        cited: Default::default(),
        quotes: Vec::new(),
        grounding: Default::default(),
        grounded: line.is_some_and(|l| l.grounded),
        attempts: 0,
        query: String::new(),
        retrieved: Vec::new(),
        raw_text: String::new(),
        snaps: Vec::new(),
        intent: String::new(),
        guided: false,
        decision: line.and_then(|l| l.decision.clone()),
        copied_words_outside_quotes: None,
        quotes_clause_aligned: None,
        quotes_clause_aligned_rate: None,
        meta_talk: None,
        unsupported_terms: None,
        answers_other: None,
        on_topic: None,
        distinct_2: None,
        quote_carries_claim: None,
        quote_relevance: None,
        clause_relevance: None,
    }
}

/// A passage the turn carries, its proof checked against the turn's book
/// root (`None`: the root is not 32 bytes).
fn proven_view(
    p: &wire::ProvenPassage,
    payload: &wire::TurnPayload,
    root: Option<&Hash>,
) -> ProvenView {
    ProvenView {
        tag: p.tag.clone(),
        label: p.label.clone(),
        node_id: p.node_id.clone(),
        text: p.text.clone(),
        hay: Haystack::new(&p.text),
        leaf: hex::encode(merkle::leaf_hash(p.text.as_bytes())),
        steps: p
            .proof
            .iter()
            .map(|st| (hex::encode(&st.sibling), st.is_left))
            .collect(),
        check: match root {
            Some(root) => signed::check_passage(p, &payload.book, root, payload.book_count)
                .map(|_| ())
                .map_err(|e| e.to_string()),
            None => Err("the turn's book root is not 32 bytes".into()),
        },
    }
}

/// A quote's kind, as its badge names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Proven: the passage's proof checks against the root the speaker
    /// announced, and the words are in the passage.
    Verified,
    /// Proven, and the speaker's words were snapped to the book's.
    Snapped,
    /// An `[oN]` quote of a turn spoken in the moot.
    Turn,
    /// Neither.
    Unverified,
}

impl Kind {
    pub fn class(self) -> &'static str {
        match self {
            Kind::Verified => "verified",
            Kind::Snapped => "snapped",
            Kind::Turn => "turn",
            Kind::Unverified => "unverified",
        }
    }
}

/// Where a quote's words were found: passage `passage` of turn `turn`.
struct Found {
    turn: usize,
    passage: usize,
}

/// The first passage, of this turn or an earlier one of the same book,
/// holding `quote` on whole words.
fn find_passage(turns: &[TurnView], at: usize, quote: &str) -> Option<Found> {
    let book = &turns[at].record.speaker;
    let needle = norm(quote);
    let order = std::iter::once(at).chain((0..at).rev());
    for t in order {
        if t != at && turns[t].record.speaker != *book {
            continue;
        }
        if let Some(p) = turns[t]
            .passages
            .iter()
            .position(|p| p.hay.contains_norm(&needle))
        {
            return Some(Found {
                turn: t,
                passage: p,
            });
        }
    }
    None
}

/// What the page says of one quote of turn `at`.
struct QuoteVerdict {
    kind: Kind,
    label: String,
    found: Option<Found>,
    /// For `[oN]` quotes: the turns (0-based) quoted.
    quoted_turns: Vec<usize>,
    why: Option<String>,
}

fn judge(turns: &[TurnView], at: usize, quote: &crate::grounding::QuoteSpan) -> QuoteVerdict {
    let turn = &turns[at];
    if let Some(numbers) = quote.turn_tags.as_ref().filter(|t| !t.is_empty()) {
        let quoted: Vec<usize> = numbers
            .iter()
            .filter_map(|n| turns.iter().position(|t| u64::from(t.record.turn) == *n))
            .collect();
        let other = quoted
            .iter()
            .any(|q| turns[*q].record.speaker != turn.record.speaker);
        let tags: Vec<String> = numbers.iter().map(|n| format!("[o{n}]")).collect();
        let found = quoted
            .iter()
            .any(|q| contains(&turns[*q].record.text, &quote.text));
        return QuoteVerdict {
            kind: Kind::Turn,
            label: format!(
                "{} {}",
                tags.join(""),
                if other { "other book" } else { "own turn" }
            ),
            found: None,
            quoted_turns: quoted,
            why: (!found).then(|| "the words are not in the quoted turn".to_string()),
        };
    }
    let unverified = |why: &str| QuoteVerdict {
        kind: Kind::Unverified,
        label: "unverified".into(),
        found: None,
        quoted_turns: Vec::new(),
        why: Some(why.to_string()),
    };
    let Some(found) = find_passage(turns, at, &quote.text) else {
        return unverified("the words are in no passage carried with a proof");
    };
    let owner = &turns[found.turn];
    if let Err(e) = &owner.passages[found.passage].check {
        return QuoteVerdict {
            found: Some(found),
            ..unverified(&format!("the passage's proof fails: {e}"))
        };
    }
    if owner.announcement.is_none() {
        return QuoteVerdict {
            found: Some(found),
            ..unverified("the root is in no announcement of the speaker")
        };
    }
    if !owner.announcement_checked {
        return QuoteVerdict {
            found: Some(found),
            ..unverified(
                "the speaker's announcement of the root does not check against the mesh roster",
            )
        };
    }
    let wanted = norm(&quote.text);
    let snapped = turn.record.snaps.iter().any(|s| {
        s.action == SnapAction::Snapped && s.to.as_deref().is_some_and(|to| norm(to) == wanted)
    });
    let kind = if snapped {
        Kind::Snapped
    } else {
        Kind::Verified
    };
    QuoteVerdict {
        kind,
        label: kind.class().into(),
        found: Some(found),
        quoted_turns: Vec::new(),
        why: None,
    }
}

/// The panel each tag group links to: for the first `sN` naming a passage
/// of this turn, the panel of the first quote proven by that passage (it
/// shows the same passage and proof) or else the passage's own; for the
/// first `oN` naming a turn, that turn.
fn tag_target(
    turns: &[TurnView],
    at: usize,
    tags: &[Tag],
    quoted: &BTreeMap<String, usize>,
) -> Option<String> {
    tags.iter().find_map(|t| match t {
        Tag::Passage(s) => match quoted.get(s) {
            Some(k) => Some(format!("p{at}-q{k}")),
            None => turns[at]
                .passages
                .iter()
                .any(|p| p.tag == *s)
                .then(|| format!("p{at}-{s}")),
        },
        Tag::Turn(Some(n)) => turns
            .iter()
            .position(|t| u64::from(t.record.turn) == *n)
            .map(|i| format!("t{i}")),
        Tag::Turn(None) => None,
    })
}

/// One turn's HTML: the `<article>` the page lists and the fragment route
/// serves.
pub fn turn(page: &MootPage<'_>, at: usize) -> String {
    let turns = &page.turns;
    let t = &turns[at];
    let r = &t.record;
    let mut out = String::new();
    turn_header(&mut out, t, at);
    let passed = r.decision.as_ref().filter(|d| d.action == "pass");
    if let Some(d) = passed {
        let _ = write!(
            out,
            "<p class=\"pass\"><span class=\"badge b-pass\">passed</span> {}</p>",
            esc(&d.reason)
        );
    }
    let parsed = ParsedReply::parse(&r.text);
    let verdicts: Vec<QuoteVerdict> = parsed.quotes.iter().map(|q| judge(turns, at, q)).collect();
    // This turn's passages that a quote's panel already shows, by tag.
    let mut quoted: BTreeMap<String, usize> = BTreeMap::new();
    for (k, v) in verdicts.iter().enumerate() {
        if let Some(f) = v.found.as_ref().filter(|f| f.turn == at) {
            quoted.entry(t.passages[f.passage].tag.clone()).or_insert(k);
        }
    }
    if !r.text.is_empty() {
        out.push_str("<p class=\"text\">");
        render_text(&mut out, turns, at, &parsed, &verdicts, &quoted);
        out.push_str("</p>");
    }
    if passed.is_none() {
        grounding_line(&mut out, r);
    }
    // The panels: one per quote, one per passage of the turn.
    for (k, (q, v)) in parsed.quotes.iter().zip(&verdicts).enumerate() {
        quote_panel(&mut out, page, at, k, &q.text, v);
    }
    cited_passage_panels(&mut out, page, at, &parsed, &quoted);
    out.push_str("</article>");
    out
}

/// A turn's `<article>` opening and header (number, book, node, time,
/// duration), and why its signed form does not read, when it does not.
fn turn_header(out: &mut String, t: &TurnView, at: usize) {
    let r = &t.record;
    let _ = write!(
        out,
        "<article class=\"turn\" id=\"t{at}\" data-index=\"{at}\"><header><span class=\"num\">Turn {}</span> \
         <strong class=\"book\">{}</strong> <span class=\"key\">{}</span> · <span class=\"node\">{}</span>",
        r.turn,
        esc(&r.title),
        esc(&r.speaker),
        esc(&t.node),
    );
    if let Some(at_ms) = t.at {
        let _ = write!(out, " · <time>{}</time>", esc(&utc(at_ms)));
    }
    if let Some(ms) = t.ms {
        let _ = write!(
            out,
            " <span class=\"took\">({:.1} s)</span>",
            ms as f64 / 1000.0
        );
    }
    out.push_str("</header>");
    if let Some(p) = &t.problem {
        let _ = write!(out, "<p class=\"problem\">{}</p>", esc(p));
    }
}

/// A spoken turn's grounding: quotes found, tags cited, words left unquoted.
fn grounding_line(out: &mut String, r: &UtteranceRecord) {
    let grounded = if r.grounded {
        "grounded"
    } else {
        "not grounded"
    };
    let g = &r.grounding;
    let _ = write!(
        out,
        "<p class=\"meta\">{grounded} · {}/{} quotes found · {} tags cited",
        g.quotes_found + g.other_quotes_found + g.self_quotes_found,
        g.quotes_total + g.other_quotes_total + g.self_quotes_total,
        g.tags_cited
    );
    let unquoted: Vec<&str> = r
        .snaps
        .iter()
        .filter(|s| s.action == SnapAction::Unquoted)
        .map(|s| s.text.as_str())
        .collect();
    if !unquoted.is_empty() {
        let _ = write!(out, " · unquoted: {}", esc(&unquoted.join(" / ")));
    }
    out.push_str("</p>");
}

/// Panels of turn `at`'s passages that the text's tags name and no quote's
/// panel shows (the others are in the export).
fn cited_passage_panels(
    out: &mut String,
    page: &MootPage<'_>,
    at: usize,
    parsed: &ParsedReply,
    quoted: &BTreeMap<String, usize>,
) {
    let t = &page.turns[at];
    let cited: std::collections::BTreeSet<String> = parsed
        .tags()
        .filter_map(|t| match t {
            Tag::Passage(s) => Some(s.clone()),
            Tag::Turn(_) => None,
        })
        .collect();
    for (i, p) in t.passages.iter().enumerate() {
        if !cited.contains(&p.tag) || quoted.contains_key(&p.tag) {
            continue;
        }
        let panel = Panel {
            id: &format!("p{at}-{}", p.tag),
            heading: &format!("Passage [{}] of turn {}", p.tag, t.record.turn),
            badge: None,
        };
        passage_panel(out, page, &panel, None, at, i);
    }
}

/// The turn's text, quotes and tag groups made into links to their panels.
fn render_text(
    out: &mut String,
    turns: &[TurnView],
    at: usize,
    parsed: &ParsedReply,
    verdicts: &[QuoteVerdict],
    quoted: &BTreeMap<String, usize>,
) {
    let chars = &parsed.chars;
    let text = |from: usize, to: usize| -> String { chars[from..to].iter().collect() };
    let mut p = 0;
    let mut quotes = parsed.quotes.iter().zip(verdicts).enumerate().peekable();
    let mut groups = parsed.groups.iter().peekable();
    while p < chars.len() {
        if let Some((k, (q, v))) = quotes.peek()
            && q.open == p
        {
            let _ = write!(
                out,
                "<a class=\"q q-{}\" href=\"#p{at}-q{k}\">{}<span class=\"badge b-{}\">{}</span></a>",
                v.kind.class(),
                esc(&text(q.open, q.close + 1)),
                v.kind.class(),
                esc(&v.label)
            );
            p = q.close + 1;
            quotes.next();
            // Tag groups inside a quote are part of its text.
            while groups.peek().is_some_and(|g| g.start < p) {
                groups.next();
            }
            continue;
        }
        if let Some(g) = groups.peek()
            && g.start == p
        {
            let shown = esc(&text(g.start, g.end));
            match tag_target(turns, at, &g.tags, quoted) {
                Some(target) => {
                    let _ = write!(out, "<a class=\"tag\" href=\"#{target}\">{shown}</a>");
                }
                None => {
                    let _ = write!(out, "<span class=\"tag bad\">{shown}</span>");
                }
            }
            p = g.end;
            groups.next();
            continue;
        }
        // Plain text up to the next quote or group.
        let next = [
            quotes.peek().map(|(_, (q, _))| q.open),
            groups.peek().map(|g| g.start),
        ]
        .into_iter()
        .flatten()
        .filter(|&n| n > p)
        .min()
        .unwrap_or(chars.len());
        out.push_str(&esc(&text(p, next)));
        p = next;
    }
}

/// A panel about quote `k` of turn `at`.
fn quote_panel(
    out: &mut String,
    page: &MootPage<'_>,
    at: usize,
    k: usize,
    quote: &str,
    v: &QuoteVerdict,
) {
    let turn_no = page.turns[at].record.turn;
    let panel = Panel {
        id: &format!("p{at}-q{k}"),
        heading: &format!("Quote {} of turn {turn_no}", k + 1),
        badge: Some((v.kind.class(), v.label.as_str(), v.why.as_deref())),
    };
    if let Some(f) = &v.found {
        passage_panel(out, page, &panel, Some(quote), f.turn, f.passage);
        return;
    }
    open_panel(out, &panel, &format!("#t{at}"));
    if v.quoted_turns.is_empty() {
        let _ = write!(
            out,
            "<p>“{}” is in none of the passages this book's turns carried with a proof.</p>",
            esc(quote)
        );
    }
    for q in &v.quoted_turns {
        let t = &page.turns[*q];
        let _ = write!(
            out,
            "<p>From <a href=\"#t{q}\">turn {}</a>, spoken by <strong>{}</strong> on {}, signed turn hash {}:</p>",
            t.record.turn,
            esc(&t.record.title),
            esc(&t.node),
            short_hex(&t.hash)
        );
        out.push_str("<blockquote class=\"passage\">");
        marked(out, &t.record.text, Some(quote));
        out.push_str("</blockquote>");
    }
    out.push_str("</div></section>");
}

/// A panel showing passage `passage` of turn `owner` and its proof.
fn passage_panel(
    out: &mut String,
    page: &MootPage<'_>,
    panel: &Panel<'_>,
    quote: Option<&str>,
    owner: usize,
    passage: usize,
) {
    let t = &page.turns[owner];
    let p = &t.passages[passage];
    // The close link returns to the turn the panel belongs to.
    let back = panel
        .id
        .strip_prefix('p')
        .and_then(|rest| rest.split('-').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(owner);
    open_panel(out, panel, &format!("#t{back}"));
    out.push_str("<blockquote class=\"passage\">");
    marked(out, &p.text, quote);
    out.push_str("</blockquote><dl class=\"facts\">");
    let _ = write!(
        out,
        "<dt>Chunk</dt><dd><code>{}</code> <code>{}</code>{}</dd>",
        esc(&p.label),
        esc(&p.node_id),
        if owner == back {
            String::new()
        } else {
            format!(" (carried by turn {})", t.record.turn)
        }
    );
    let _ = write!(
        out,
        "<dt>Leaf hash</dt><dd><code class=\"hash\">{}</code></dd>",
        esc(&p.leaf)
    );
    proof_path(out, &p.steps);
    let verdict = match &p.check {
        Ok(()) => "<span class=\"ok\">✓ the proof checks against this root</span>".to_string(),
        Err(e) => format!("<span class=\"fail\">✗ {}</span>", esc(e)),
    };
    let _ = write!(
        out,
        "<dt>Root</dt><dd><code class=\"hash root\">{}</code> ({} chunks)<br>{verdict}</dd>",
        esc(&t.root),
        t.count
    );
    announcement_fact(
        out,
        t.announcement.map(|a| &page.announcements[a]),
        "no announcement of the speaker holds this root",
    );
    out.push_str("</dl></div></section>");
}

/// The moot's state and grounding stats (the `/moots/ID/state` fragment).
pub fn state(page: &MootPage<'_>) -> String {
    let v = &page.moot.view;
    let mut out = String::new();
    let state = v.state.as_str();
    let _ = write!(
        out,
        "<section id=\"moot-state\" data-state=\"{state}\" data-turns=\"{}\" aria-live=\"polite\">\
         <p><span class=\"badge s-{state}\">{state}</span>",
        page.turns.len()
    );
    if let Some(reason) = v.reason.as_deref().filter(|_| v.state == MootState::Paused) {
        let _ = write!(out, " <span class=\"reason\">{}</span>", esc(reason));
    }
    let _ = write!(out, " · {} of {} turns</p>", v.turns_done, v.turns);
    // Grounding of the turns so far (the transcript's own stats once
    // finished).
    out.push_str("<dl class=\"stats\">");
    match &v.transcript {
        Some(tr) => finished_stats(&mut out, &tr.stats),
        None => stats_so_far(&mut out, &page.turns),
    }
    out.push_str("</dl>");
    out.push_str("</section>");
    out
}

/// One row of the stats list.
fn stat_row(dl: &mut String, k: &str, val: String) {
    let _ = write!(dl, "<div><dt>{k}</dt><dd>{val}</dd></div>");
}

/// The finished moot's transcript stats.
fn finished_stats(dl: &mut String, s: &Stats) {
    let rate = |r: Option<f64>| r.map_or("–".into(), |r| format!("{:.0} %", r * 100.0));
    stat_row(
        dl,
        "grounded turns",
        format!("{} of {}", s.grounded_turns, s.turns - s.passed_turns),
    );
    stat_row(
        dl,
        "own-book quotes found",
        format!(
            "{} of {} ({})",
            s.quotes_found,
            s.quotes_total,
            rate(s.quote_found_rate)
        ),
    );
    stat_row(
        dl,
        "[oN] quotes valid",
        format!("{} of {}", s.other_quotes_found, s.other_quotes_total),
    );
    stat_row(dl, "snapped", s.quotes_snapped.to_string());
    stat_row(dl, "unquoted", s.quotes_unquoted.to_string());
    stat_row(dl, "passed turns", s.passed_turns.to_string());
}

/// The grounding of the turns spoken so far, summed over their records.
fn stats_so_far(dl: &mut String, turns: &[TurnView]) {
    let spoken: Vec<&UtteranceRecord> = turns
        .iter()
        .map(|t| &t.record)
        .filter(|r| r.decision.as_ref().is_none_or(|d| d.action != "pass"))
        .collect();
    let sum = |f: fn(&UtteranceRecord) -> u32| spoken.iter().map(|r| f(r)).sum::<u32>();
    stat_row(
        dl,
        "grounded turns",
        format!(
            "{} of {}",
            spoken.iter().filter(|r| r.grounded).count(),
            spoken.len()
        ),
    );
    stat_row(
        dl,
        "own-book quotes found",
        format!(
            "{} of {}",
            sum(|r| r.grounding.quotes_found),
            sum(|r| r.grounding.quotes_total)
        ),
    );
    stat_row(
        dl,
        "[oN] quotes valid",
        format!(
            "{} of {}",
            sum(|r| r.grounding.other_quotes_found),
            sum(|r| r.grounding.other_quotes_total)
        ),
    );
    stat_row(
        dl,
        "snapped",
        sum(|r| {
            r.snaps
                .iter()
                .filter(|s| s.action == SnapAction::Snapped)
                .count() as u32
        })
        .to_string(),
    );
    stat_row(dl, "passed turns", (turns.len() - spoken.len()).to_string());
}

/// The whole page.
pub fn page_html(page: &MootPage<'_>, roster: Option<&Roster>) -> String {
    let v = &page.moot.view;
    let mut body = String::new();
    let title = match &v.topic {
        Some(t) => format!("Moot on {t}"),
        None => "Moot".to_string(),
    };
    let _ = write!(
        body,
        "<div class=\"moot\" data-moot=\"{}\"><h1>{}</h1><p class=\"trees\">",
        esc(&v.id),
        esc(&title)
    );
    for (i, t) in v.trees.iter().enumerate() {
        let node = t
            .peer_id
            .parse::<libp2p::PeerId>()
            .map(|p| member_name(roster, &p.to_bytes()))
            .unwrap_or_else(|_| t.peer_id.clone());
        if i > 0 {
            body.push_str(" <span aria-hidden=\"true\">⇄</span> ");
        }
        let _ = write!(
            body,
            "<strong>{}</strong> <span class=\"key\">{}</span> on {}",
            esc(&t.title),
            esc(&t.key),
            esc(&node)
        );
    }
    let _ = write!(
        body,
        "</p><p class=\"id\">moot <code>{}</code>, hosted by {}</p>",
        esc(&v.id),
        short_hex(&v.host)
    );
    body.push_str(&state(page));
    body.push_str(
        "<p class=\"legend\">Badges: <span class=\"badge b-verified\">verified</span> proven against the root the speaker announced · \
         <span class=\"badge b-snapped\">snapped</span> snapped to the book's words, proven · \
         <span class=\"badge b-turn\">[oN]</span> quotes a turn of the moot · \
         <span class=\"badge b-unverified\">unverified</span> no proof. Select a quote or a tag to see its proof.</p>",
    );
    body.push_str("<section id=\"turns\" aria-label=\"Turns\">");
    for i in 0..page.turns.len() {
        body.push_str(&turn(page, i));
    }
    body.push_str("</section></div>");
    super::html::page(&title, &body, &["moot.js"])
}
