//! Verifying a transcript from the transcript alone: re-grade and re-snap
//! every utterance from its raw text, recorded passages and rebuilt pools,
//! check every passage's leaf hash and id, and recompute the stats.

use std::collections::BTreeMap;

use super::host::{answered_tree, lines_of, turn_maps};
use super::reading::{READING_VERSION, ReadingVersion, TurnReading};
use super::speaker::{
    extend_pool, opening_query, pass_problem, record_reply, turn_figures, turn_query, turn_reading,
};
use super::stats::{self, TurnFigures};
use super::transcript::{PassageRecord, RecordError, TranscriptRecord, UtteranceRecord};
use super::{Move, Passage, TaggedPassage, Tree, Utterance};
use crate::grounding;

/// One disagreement between a transcript and its re-check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The turn it concerns, if any.
    pub turn: Option<u32>,
    pub what: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.turn {
            Some(t) => write!(f, "turn {t}: {}", self.what),
            None => write!(f, "{}", self.what),
        }
    }
}

/// A store that may hold the books of a transcript, for the optional check
/// of each passage against the stored chunk.
pub trait ChunkLookup {
    /// The stored text of chunk `index` of book `key`; `Ok(None)` when the
    /// store does not hold that book. (The error is the store's own, boxed:
    /// this core does not know the store's types.)
    fn chunk_text(&mut self, key: &str, index: u64) -> Result<Option<String>, LookupError>;
}

/// Why a chunk lookup failed, as the store reported it.
pub type LookupError = Box<dyn std::error::Error + Send + Sync>;

/// The chunk label of index `i` (para-200-v1): `chunk:` and 4+ digits.
pub fn chunk_label(index: u64) -> String {
    format!("chunk:{index:04}")
}

struct Report {
    mismatches: Vec<Mismatch>,
}

impl Report {
    fn add(&mut self, turn: Option<u32>, what: impl Into<String>) {
        self.mismatches.push(Mismatch {
            turn,
            what: what.into(),
        });
    }

    fn compare<T: PartialEq + std::fmt::Debug>(
        &mut self,
        turn: Option<u32>,
        field: &str,
        recorded: &T,
        rechecked: &T,
    ) {
        if recorded != rechecked {
            self.add(
                turn,
                format!("{field}: recorded {recorded:?}, re-checked {rechecked:?}"),
            );
        }
    }
}

/// Verifies a transcript. Returns every mismatch found (empty when it
/// checks out); a record that cannot even be read is an error.
///
/// The checks run in this order, each adding its mismatches: the trees,
/// the reading version, the openings, every turn, the summaries, the stats.
pub fn verify(
    transcript: &TranscriptRecord,
    store: Option<&mut dyn ChunkLookup>,
) -> Result<Vec<Mismatch>, RecordError> {
    let mut report = Report {
        mismatches: Vec::new(),
    };
    let trees: Vec<Tree> = transcript.trees.iter().map(Tree::from).collect();
    let n = trees.len();
    if n < 2 {
        report.add(None, format!("{n} trees; a moot has at least 2"));
        return Ok(report.mismatches);
    }
    check_trees(&mut report, &trees);
    let reads = reading_version(&mut report, transcript.settings.reading.as_deref());
    let mut recheck = Recheck {
        transcript,
        topic: transcript.topic.as_deref(),
        reads,
        store,
        report,
        pools: vec![Vec::new(); n],
        opening_passages: vec![Vec::new(); n],
        trees,
        rechecked: Vec::new(),
    };
    recheck.openings()?;
    recheck.utterances()?;
    check_summaries(&mut recheck.report, transcript);
    check_stats(&mut recheck.report, transcript, &recheck.rechecked);
    Ok(recheck.report.mismatches)
}

/// The trees: no book twice, each genre the first part of its key.
fn check_trees(report: &mut Report, trees: &[Tree]) {
    if let Some(key) = super::host::repeated_book(trees.iter().map(|t| t.key.as_str())) {
        report.add(None, format!("the same book {key} twice"));
    }
    for tree in trees {
        let genre = tree.key.split('/').next().unwrap_or_default();
        if tree.genre != genre {
            report.add(
                None,
                format!(
                    "tree {}: genre {:?} is not the key's first part",
                    tree.key, tree.genre
                ),
            );
        }
    }
}

/// The version of the reading measures to re-derive. Reading measures are
/// re-derived when the transcript records their version (this code knows
/// one), and must be absent when it does not.
fn reading_version(report: &mut Report, recorded: Option<&str>) -> Option<ReadingVersion> {
    let name = recorded?;
    let version = ReadingVersion::parse(name);
    if version.is_none() {
        report.add(
            None,
            format!("reading measures {name}: this grove knows reading-v1 to {READING_VERSION}"),
        );
    }
    version
}

/// The re-check of a transcript's openings and turns, in order: the pools
/// rebuilt from their passages and the turns re-checked so far, which
/// later turns are checked against.
struct Recheck<'a, 's> {
    transcript: &'a TranscriptRecord,
    trees: Vec<Tree>,
    topic: Option<&'a str>,
    reads: Option<ReadingVersion>,
    store: Option<&'s mut dyn ChunkLookup>,
    report: Report,
    /// Per tree: every passage its book returned so far, each once.
    pools: Vec<Vec<Passage>>,
    opening_passages: Vec<Vec<TaggedPassage>>,
    /// The turns so far, as re-checked (the recorded text carried forward).
    rechecked: Vec<Utterance>,
}

/// One spoken turn's sources as the re-check rebuilt them.
struct SpokenTurn<'r> {
    at: Option<u32>,
    /// The speaking tree's index.
    t: usize,
    record: &'r UtteranceRecord,
    tagged: Vec<TaggedPassage>,
    own_turns: BTreeMap<u64, String>,
    other_turns: BTreeMap<u64, String>,
    /// The last line spoken before this turn (absent on turn 1).
    last_line: Option<String>,
}

impl Recheck<'_, '_> {
    /// The openings, which start the pools.
    fn openings(&mut self) -> Result<(), RecordError> {
        let transcript = self.transcript;
        let n = self.trees.len();
        if transcript.openings.len() != n {
            self.report.add(
                None,
                format!("{} openings instead of {n}", transcript.openings.len()),
            );
        }
        for (t, opening) in transcript.openings.iter().enumerate().take(n) {
            let tree = &self.trees[t];
            let report = &mut self.report;
            report.compare(None, &format!("opening {t} tree"), &opening.tree, &tree.key);
            report.compare(
                None,
                &format!("opening query of {}", tree.key),
                &opening.query,
                &opening_query(self.topic, tree),
            );
            let tagged = check_passages(
                report,
                None,
                tree,
                &opening.passages,
                transcript.settings.k,
                &mut self.store,
            )?;
            self.add_to_pool(t, &tagged);
            self.opening_passages[t] = tagged;
        }
        Ok(())
    }

    fn add_to_pool(&mut self, t: usize, tagged: &[TaggedPassage]) {
        let plain: Vec<Passage> = tagged.iter().map(|t| t.passage.clone()).collect();
        extend_pool(&mut self.pools[t], &plain);
    }

    /// Every turn, in order.
    fn utterances(&mut self) -> Result<(), RecordError> {
        let transcript = self.transcript;
        self.report.compare(
            None,
            "number of utterances",
            &transcript.utterances.len(),
            &(transcript.settings.turns as usize),
        );
        for (i, record) in transcript.utterances.iter().enumerate() {
            let utterance = self.utterance(i, record)?;
            self.rechecked.push(utterance);
        }
        Ok(())
    }

    /// Turn `i + 1`: who speaks, its passages and query, then (for a pass)
    /// its shape or (for a spoken turn) its re-grading and measures.
    fn utterance(&mut self, i: usize, record: &UtteranceRecord) -> Result<Utterance, RecordError> {
        let turn = i as u32 + 1;
        let at = Some(turn);
        let t = i % self.trees.len();
        self.check_speaker(turn, t, record);
        let tagged = check_passages(
            &mut self.report,
            at,
            &self.trees[t],
            &record.retrieved,
            self.transcript.settings.k,
            &mut self.store,
        )?;
        let last_line = self.check_query(at, t, record, &tagged);
        self.add_to_pool(t, &tagged);
        let (own_turns, other_turns) = turn_maps(&self.rechecked, &self.trees[t].key);
        let utterance = Utterance::try_from(record)?;
        if utterance.passed() {
            // A pass says nothing: only its shape is checked; the decision
            // itself is the speaking node's, vouched for by its signature.
            let pool = &self.pools[t];
            if let Some(what) = pass_problem(&utterance, pool, &other_turns, &own_turns) {
                self.report.add(at, what);
            }
            return Ok(utterance);
        }
        let spoken = SpokenTurn {
            at,
            t,
            record,
            tagged,
            own_turns,
            other_turns,
            last_line,
        };
        Ok(self.spoken(&spoken, utterance))
    }

    /// The turn's number, speaker, title and move.
    fn check_speaker(&mut self, turn: u32, t: usize, record: &UtteranceRecord) {
        let at = Some(turn);
        let tree = &self.trees[t];
        let settings = &self.transcript.settings;
        let report = &mut self.report;
        report.compare(at, "turn", &record.turn, &turn);
        report.compare(at, "speaker", &record.speaker, &tree.key);
        report.compare(at, "title", &record.title, &tree.name().to_string());
        report.compare(
            at,
            "intent",
            &record.intent,
            &Move::for_turn_of(turn, settings.turns, self.trees.len() as u32)
                .as_str()
                .to_string(),
        );
    }

    /// The query, and on turn 1 the passages, follow from what came before.
    /// Returns the last line spoken before this turn.
    fn check_query(
        &mut self,
        at: Option<u32>,
        t: usize,
        record: &UtteranceRecord,
        tagged: &[TaggedPassage],
    ) -> Option<String> {
        let tree = &self.trees[t];
        let lines = lines_of(&self.rechecked);
        match lines.last() {
            None => {
                let query = opening_query(self.topic, tree);
                self.report.compare(at, "query", &record.query, &query);
                if tagged != self.opening_passages[t] {
                    self.report
                        .add(at, "turn 1 does not speak from its opening passages");
                }
            }
            Some(line) => {
                let query = turn_query(self.topic, &line.text);
                self.report.compare(at, "query", &record.query, &query);
            }
        }
        lines.last().map(|l| l.text.clone())
    }

    /// A spoken turn: its re-grading and its measures; returns it as later
    /// turns see it.
    fn spoken(&mut self, turn: &SpokenTurn<'_>, mut utterance: Utterance) -> Utterance {
        let checked = self.regrade(turn);
        let (figures, reading) = self.remeasure(turn, &checked.text);
        // Carry the recorded text forward: later turns quote what was stored.
        utterance.figures = figures;
        utterance.reading = reading;
        utterance.text = checked.text;
        utterance.grounding = checked.grounding;
        utterance.grounded = checked.passes;
        utterance.snaps = checked.snaps;
        utterance
    }

    /// Re-grades and re-snaps the raw reply against the rebuilt sources,
    /// and checks the attempts it took.
    fn regrade(&mut self, turn: &SpokenTurn<'_>) -> grounding::Checked {
        let (at, record) = (turn.at, turn.record);
        let (checked, cited) = record_reply(
            &record.raw_text,
            &turn.tagged,
            &self.pools[turn.t],
            &turn.other_turns,
            &turn.own_turns,
        );
        let report = &mut self.report;
        report.compare(
            at,
            "grounding",
            &record.grounding,
            &checked.grounding.counts,
        );
        report.compare(at, "quotes", &record.quotes, &checked.grounding.quotes);
        report.compare(at, "grounded", &record.grounded, &checked.passes);
        report.compare(at, "text", &record.text, &checked.text);
        report.compare(at, "snaps", &record.snaps, &checked.snaps);
        report.compare(at, "cited", &record.cited, &cited);
        if !(1..=2).contains(&record.attempts) {
            report.add(at, format!("attempts {} is not 1 or 2", record.attempts));
        }
        if record.attempts == 1 && !checked.passes {
            report.add(at, "a first reply that does not pass was not retried");
        }
        if record.raw_text.trim().is_empty() {
            report.add(at, "the kept reply is empty");
        }
        checked
    }

    /// Re-derives the turn's own-words figures and reading measures from
    /// its snapped `text`, and compares them with the recorded ones.
    fn remeasure(
        &mut self,
        turn: &SpokenTurn<'_>,
        text: &str,
    ) -> (Option<TurnFigures>, Option<TurnReading>) {
        let tree = &self.trees[turn.t];
        let other = &self.trees[answered_tree(&self.rechecked, &self.trees, turn.t)];
        let titles = [tree.name().to_string(), other.name().to_string()];
        let settings = &self.transcript.settings;
        let figures = settings.copy_run_words.map(|n| {
            turn_figures(
                text,
                &turn.tagged,
                &turn.own_turns,
                &turn.other_turns,
                &titles,
                n as usize,
            )
        });
        compare_figures(&mut self.report, turn.at, turn.record, figures);
        let reading = self.reads.map(|version| {
            turn_reading(
                text,
                &turn.tagged,
                &turn.own_turns,
                &turn.other_turns,
                &titles,
                self.topic,
                turn.last_line.as_deref(),
                version,
            )
        });
        compare_reading(&mut self.report, turn.at, turn.record, reading.as_ref());
        (figures, reading)
    }
}

/// Each summary: placed before a turn the settings put one, in order, and
/// within the word limit.
fn check_summaries(report: &mut Report, transcript: &TranscriptRecord) {
    let settings = &transcript.settings;
    let mut previous = 0u32;
    for s in &transcript.summaries {
        let index = s.before_turn.saturating_sub(1);
        let placed = settings.summary_every > 0
            && index > 0
            && index % settings.summary_every == 0
            && s.before_turn <= settings.turns
            && s.before_turn > previous;
        if !placed {
            report.add(
                None,
                format!("summary before turn {} is out of place", s.before_turn),
            );
        }
        if s.text.split_whitespace().count() > super::prompt::MAX_SUMMARY_WORDS {
            report.add(
                None,
                format!(
                    "summary before turn {} is over {} words",
                    s.before_turn,
                    super::prompt::MAX_SUMMARY_WORDS
                ),
            );
        }
        previous = s.before_turn;
    }
}

/// The stats, recomputed from the re-checked turns.
fn check_stats(report: &mut Report, transcript: &TranscriptRecord, rechecked: &[Utterance]) {
    let stats = stats::compute(rechecked);
    if stats != transcript.stats {
        report.add(
            None,
            format!(
                "stats: recorded {:?}, re-computed {:?}",
                transcript.stats, stats
            ),
        );
    }
}

/// Compares a spoken turn's recorded own-words figures with the ones
/// re-derived (`None` when the transcript records no run length, as before
/// the figures existed).
fn compare_figures(
    report: &mut Report,
    at: Option<u32>,
    record: &UtteranceRecord,
    figures: Option<TurnFigures>,
) {
    let recorded = (
        record.copied_words_outside_quotes,
        record.quotes_clause_aligned,
        record.quotes_clause_aligned_rate,
    );
    let rechecked = (
        figures.map(|f| f.copied_words_outside_quotes),
        figures.map(|f| f.quotes_clause_aligned),
        figures.and_then(|f| f.clause_aligned_rate()),
    );
    report.compare(
        at,
        "own-words figures (copied words outside quotes, clause-aligned quotes, rate)",
        &recorded,
        &rechecked,
    );
}

/// Compares a spoken turn's recorded reading measures with the ones
/// re-derived (`None` when the transcript records no reading version).
fn compare_reading(
    report: &mut Report,
    at: Option<u32>,
    record: &UtteranceRecord,
    reading: Option<&TurnReading>,
) {
    let recorded = (
        record.meta_talk,
        record.unsupported_terms.clone(),
        record.answers_other,
        record.on_topic,
        record.distinct_2,
    );
    let rechecked = (
        reading.map(|r| r.meta_talk),
        reading.map(|r| r.unsupported_terms.clone()),
        reading.and_then(|r| r.answers_other),
        reading.map(|r| r.on_topic),
        reading.and_then(|r| r.distinct_2),
    );
    report.compare(
        at,
        "reading (meta talk, unsupported terms, answers other, on topic, distinct-2)",
        &recorded,
        &rechecked,
    );
    let recorded = (
        record.quote_carries_claim,
        record.quote_relevance,
        record.clause_relevance,
    );
    let rechecked = (
        reading.and_then(|r| r.quote_carries_claim),
        reading.and_then(|r| r.quote_relevance),
        reading.and_then(|r| r.clause_relevance),
    );
    report.compare(
        at,
        "reading of quotes (carries the claim, quote relevance, clause relevance)",
        &recorded,
        &rechecked,
    );
}

/// Checks a turn's passages: tags `s1..sk`, ids from the tree's own book,
/// labels, leaf hashes, and the stored chunk where the store holds it.
fn check_passages(
    report: &mut Report,
    at: Option<u32>,
    tree: &Tree,
    passages: &[PassageRecord],
    k: usize,
    store: &mut Option<&mut dyn ChunkLookup>,
) -> Result<Vec<TaggedPassage>, RecordError> {
    if passages.is_empty() || passages.len() > k {
        report.add(
            at,
            format!("{} passages (expected 1 to k = {k})", passages.len()),
        );
    }
    let mut seen = BTreeMap::new();
    let mut tagged = Vec::new();
    for (i, record) in passages.iter().enumerate() {
        let expected_tag = format!("s{}", i + 1);
        if record.tag != expected_tag {
            report.add(
                at,
                format!("passage tag {} where {expected_tag} was due", record.tag),
            );
        }
        let passage = TaggedPassage::try_from(record)?;
        let p = &passage.passage;
        if p.node_id != format!("{}#{}", tree.key, p.index) {
            report.add(
                at,
                format!("passage {} is not from {}", p.node_id, tree.key),
            );
        }
        if seen.insert(p.node_id.clone(), ()).is_some() {
            report.add(at, format!("passage {} appears twice", p.node_id));
        }
        if p.label != chunk_label(p.index) {
            report.add(at, format!("passage {} has label {}", p.node_id, p.label));
        }
        let leaf = hex::encode(crate::merkle::leaf_hash(p.content.as_bytes()));
        if p.leaf != leaf {
            report.add(
                at,
                format!(
                    "passage {}: leaf {} does not hash its text ({leaf})",
                    p.node_id, p.leaf
                ),
            );
        }
        if let Some(store) = store.as_deref_mut() {
            match store.chunk_text(&tree.key, p.index) {
                Ok(Some(stored)) if stored != p.content => {
                    report.add(
                        at,
                        format!("passage {} differs from the stored chunk", p.node_id),
                    );
                }
                Ok(_) => {}
                Err(e) => report.add(
                    at,
                    format!("passage {}: store lookup failed: {e}", p.node_id),
                ),
            }
        }
        tagged.push(passage);
    }
    Ok(tagged)
}
