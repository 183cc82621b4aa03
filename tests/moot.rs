//! The moot engine end to end with a fake model and fake retrievers:
//! turn order, retries, snapping, `[oN]` quotes, summaries, cited passages
//! going to the back, and `verify` catching tampering.

use std::collections::BTreeSet;

use grove::model::{ChatModel, ChatRequest, ModelError, Role};
use grove::moot::host::run_local;
use grove::moot::transcript::TranscriptRecord;
use grove::moot::verify::verify;
use grove::moot::{MootError, MootSettings, Passage, RetrieveError, Retriever, Tree};

/// A book as a list of chunks; search ranks chunks by shared words.
struct FakeBook {
    key: String,
    chunks: Vec<String>,
    queries: Vec<(String, usize)>,
}

impl FakeBook {
    fn new(key: &str, words: &[&str]) -> FakeBook {
        // 12 chunks, each a distinct run of sentences over the vocabulary.
        let chunks = (0..12)
            .map(|c| {
                (0..40)
                    .map(|w| words[(c * 7 + w * 3) % words.len()])
                    .collect::<Vec<_>>()
                    .join(" ")
                    + "."
            })
            .collect();
        FakeBook {
            key: key.to_string(),
            chunks,
            queries: Vec::new(),
        }
    }
}

impl Retriever for FakeBook {
    fn search(&mut self, query: &str, k: usize) -> Result<Vec<Passage>, RetrieveError> {
        self.queries.push((query.to_string(), k));
        let q: BTreeSet<String> = query.split_whitespace().map(|w| w.to_lowercase()).collect();
        let mut scored: Vec<(usize, usize)> = self
            .chunks
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let score = c
                    .split_whitespace()
                    .filter(|w| q.contains(&w.to_lowercase()))
                    .count();
                (score, i)
            })
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        Ok(scored
            .into_iter()
            .take(k)
            .map(|(_, i)| Passage {
                node_id: format!("{}#{i}", self.key),
                label: format!("chunk:{i:04}"),
                index: i as u64,
                leaf: hex::encode(grove::merkle::leaf_hash(self.chunks[i].as_bytes())),
                content: self.chunks[i].clone(),
            })
            .collect())
    }
}

/// What the fake model does on one speaker call.
#[derive(Clone, Copy, Debug)]
enum Act {
    /// Quote the first five words of s1, tagged [s1].
    Good,
    /// Cite a tag that does not exist.
    BadTag,
    /// Say nothing.
    Empty,
    /// Misquote s1 (one word changed), tagged [s1].
    Misquote,
    /// Quote the other book's last line as [oN], plus a good quote.
    QuoteOther,
    /// Repeat the other book's last line as its own words, plus a good quote.
    Echo,
}

struct FakeModel {
    script: Vec<Act>,
    calls: usize,
    narrator_calls: usize,
    requests: Vec<ChatRequest>,
}

impl FakeModel {
    fn new(script: &[Act]) -> FakeModel {
        FakeModel {
            script: script.to_vec(),
            calls: 0,
            narrator_calls: 0,
            requests: Vec::new(),
        }
    }
}

fn first_passage_words(message: &str) -> Vec<String> {
    grove::moot::prompt::passage_first_line(message, "s1")
        .unwrap_or("")
        .split_whitespace()
        .map(|w| w.trim_end_matches('.').to_string())
        .collect()
}

/// The other book's last line in a user message (`<line>\n\n<question>`).
fn incoming_line(user: &str) -> &str {
    user.split("\n\n").next().unwrap_or_default()
}

impl ChatModel for FakeModel {
    fn complete(&mut self, request: &ChatRequest) -> Result<String, ModelError> {
        self.requests.push(request.clone());
        if request.messages[0].content.contains("neutral narrator") {
            self.narrator_calls += 1;
            return Ok(if self.narrator_calls == 1 {
                "Both books spoke of rivers and whales.".to_string()
            } else {
                String::new()
            });
        }
        let act = self.script.get(self.calls).copied().unwrap_or(Act::Good);
        self.calls += 1;
        // The passages are in the system message, the other's line in the
        // user message.
        let words = first_passage_words(&request.messages[0].content);
        let user = &request.messages[1].content;
        let quote = words[..5].join(" ");
        Ok(match act {
            Act::Good => format!("I hold that \"{quote}\" [s1], as I have said [s2]."),
            Act::BadTag => format!("I hold that \"{quote}\" [s9]."),
            Act::Empty => String::new(),
            Act::Misquote => {
                let mut w = words[..6].to_vec();
                w[2] = "zebra".to_string();
                format!("Indeed \"{}\" [s1].", w.join(" "))
            }
            Act::QuoteOther => {
                let said = incoming_line(user)
                    .split('"')
                    .nth(1)
                    .unwrap_or("nothing at all here");
                // The line answered is the previous turn's; a turn's seed
                // is `2·turn` (base seed 0), its retry's `2·turn + 1`.
                let turn = request.seed / 2 - 1;
                format!("You said \"{said}\" [o{turn}], yet \"{quote}\" [s1].")
            }
            Act::Echo => {
                let said = incoming_line(user);
                format!("{said} \"{quote}\" [s1].")
            }
        })
    }

    fn describe(&self) -> String {
        "fake:scripted".to_string()
    }
}

const RIVER: &[&str] = &[
    "the", "river", "runs", "cold", "and", "clear", "under", "willow", "banks", "where", "trout",
    "lie", "still", "in", "morning", "light", "angler", "waits", "patient", "hook",
];
const SEA: &[&str] = &[
    "the", "whale", "rose", "from", "dark", "water", "ship", "captain", "watched", "white", "sea",
    "foam", "broke", "over", "deck", "sailors", "cried", "out", "harpoon", "line", "river",
];

fn trees() -> [Tree; 2] {
    [
        Tree::new("nature/angler", "The Compleat Angler", "Izaak Walton"),
        Tree::new("fiction/whale", "Moby Dick", "Herman Melville"),
    ]
}

fn settings(turns: u32) -> MootSettings {
    MootSettings {
        turns,
        k: 3,
        ..MootSettings::default()
    }
}

#[test]
fn a_moot_runs_records_and_verifies() {
    let mut a = FakeBook::new("nature/angler", RIVER);
    let mut b = FakeBook::new("fiction/whale", SEA);
    let script = [
        Act::BadTag,   // turn 1, first try: invalid tag -> retried
        Act::Good,     // turn 1, retry
        Act::Misquote, // turn 2: snapped (does not pass -> retried)
        Act::Empty,    // turn 2 retry: empty -> first reply kept
        Act::QuoteOther,
        Act::Good,
        Act::Good,
        Act::Good,
    ];
    let mut model = FakeModel::new(&script);
    let mut seen = Vec::new();
    let moot = run_local(
        trees(),
        Some("rivers".into()),
        settings(6),
        [&mut a, &mut b],
        &mut model,
        &mut |u| seen.push(u.turn),
    )
    .expect("moot runs");
    assert_eq!(seen, [1, 2, 3, 4, 5, 6]);
    let u = &moot.utterances;
    assert_eq!(u.len(), 6);
    assert_eq!(u[0].speaker, "nature/angler");
    assert_eq!(u[1].speaker, "fiction/whale");
    assert_eq!(u[0].intent.as_str(), "open");
    assert_eq!(u[1].intent.as_str(), "answer");
    assert_eq!(u[4].intent.as_str(), "close");
    assert_eq!(u[5].intent.as_str(), "close");
    // Turn 1: retried after an invalid tag, grounded on the second reply.
    assert_eq!(u[0].attempts, 2);
    assert!(u[0].grounded);
    assert_eq!(u[0].query, "rivers");
    // Turn 2: the misquote is kept (retry was empty), snapped, not grounded.
    assert_eq!(u[1].attempts, 2);
    assert!(!u[1].grounded);
    assert_eq!(u[1].snaps.len(), 1);
    assert_eq!(u[1].snaps[0].action.as_str(), "snapped");
    assert!(!u[1].text.contains("zebra"));
    assert!(u[1].raw_text.contains("zebra"));
    // Turn 3 quotes turn 2 as [o2]: an `other` quote, found in the stored text.
    assert_eq!(u[2].grounding.counts.other_quotes_total, 1);
    assert_eq!(u[2].query, format!("rivers {}", u[1].text));
    // Cited maps valid tags to node ids of this turn's passages.
    assert_eq!(u[0].cited.len(), 2);
    assert!(u[0].cited["s1"].starts_with("nature/angler#"));
    // One summary, before turn 5 (0-based index 4); the narrator's empty
    // second answer would keep it, but turn 9 never comes.
    assert_eq!(moot.summaries.len(), 1);
    assert_eq!(moot.summaries[0].before_turn, 5);
    let stats = &moot.stats;
    assert_eq!(stats.turns, 6);
    assert_eq!(stats.retried_turns, 2);
    assert_eq!(stats.quotes_snapped, 1);
    assert_eq!(stats.grounded_turns, 5);

    // Later searches ask for 3k hits.
    assert!(a.queries.iter().skip(1).all(|(_, k)| *k == 9));

    let record = TranscriptRecord::from(&moot);
    let json = record.to_json_pretty();
    let parsed = TranscriptRecord::from_json(&json).expect("parses back");
    assert_eq!(parsed, record);
    let mismatches = verify(&parsed, None).expect("verifies");
    assert!(mismatches.is_empty(), "{mismatches:?}");

    // Tampering is caught: a changed passage text no longer hashes to its leaf.
    let mut tampered = parsed.clone();
    tampered.utterances[2].retrieved[0].content.push('!');
    let mismatches = verify(&tampered, None).expect("verifies");
    assert!(
        mismatches.iter().any(|m| m.what.contains("does not hash")),
        "{mismatches:?}"
    );
    // A changed stat is caught.
    let mut tampered = parsed.clone();
    tampered.stats.grounded_turns += 1;
    assert!(!verify(&tampered, None).expect("verifies").is_empty());
    // A changed stored text is caught.
    let mut tampered = parsed;
    tampered.utterances[0].text = "something else".into();
    assert!(!verify(&tampered, None).expect("verifies").is_empty());
}

/// Each turn records its own-words figures; the moot's stats add them up;
/// `verify` re-derives them from the transcript, catches a changed one, and
/// still accepts a transcript written before they existed.
#[test]
fn own_words_figures_are_recorded_and_re_derived() {
    let mut a = FakeBook::new("nature/angler", RIVER);
    let mut b = FakeBook::new("fiction/whale", SEA);
    let mut model = FakeModel::new(&[Act::Good, Act::Echo, Act::Good]);
    let moot = run_local(
        trees(),
        None,
        settings(3),
        [&mut a, &mut b],
        &mut model,
        &mut |_| {},
    )
    .expect("moot runs");
    let figures: Vec<_> = moot
        .utterances
        .iter()
        .map(|u| u.figures.expect("figures"))
        .collect();
    // Turn 1 has nothing before it to copy; its quote (a passage's first
    // five words) ends mid-sentence. Turn 2 repeats turn 1's words (`as I
    // have said`) outside its quotes.
    assert_eq!(figures[0].copied_words_outside_quotes, 0, "{figures:?}");
    assert_eq!(
        (figures[0].quotes, figures[0].quotes_clause_aligned),
        (1, 0)
    );
    assert!(figures[1].copied_words_outside_quotes >= 4, "{figures:?}");
    let copied: u32 = figures.iter().map(|f| f.copied_words_outside_quotes).sum();
    let quotes: u32 = figures.iter().map(|f| f.quotes).sum();
    let aligned: u32 = figures.iter().map(|f| f.quotes_clause_aligned).sum();
    assert_eq!(moot.stats.copied_words_outside_quotes, Some(copied));
    let rate = (f64::from(aligned) / f64::from(quotes) * 1000.0).round() / 1000.0;
    assert_eq!(moot.stats.quotes_clause_aligned_rate, Some(rate));

    let record = TranscriptRecord::from(&moot);
    assert_eq!(record.settings.copy_run_words, Some(4));
    let json = record.to_json_pretty();
    assert!(json.contains("\"copied_words_outside_quotes\""), "{json}");
    assert!(
        json.contains("\"quotes_clause_aligned_rate\": 0.0"),
        "{json}"
    );
    assert!(json.contains("\"copy_run_words\": 4"), "{json}");
    let parsed = TranscriptRecord::from_json(&json).expect("parses");
    assert_eq!(verify(&parsed, None).expect("verifies"), []);
    let mut tampered = parsed.clone();
    tampered.utterances[1].copied_words_outside_quotes = Some(0);
    let mismatches = verify(&tampered, None).expect("verifies");
    assert!(
        mismatches
            .iter()
            .any(|m| m.what.contains("own-words figures")),
        "{mismatches:?}"
    );
    // A transcript from before the figures (and the reading measures): no
    // run length, no figures.
    let mut old: serde_json::Value = serde_json::from_str(&json).expect("json");
    strip_reading(&mut old);
    old["settings"]
        .as_object_mut()
        .expect("settings")
        .remove("copy_run_words");
    for key in ["copied_words_outside_quotes", "quotes_clause_aligned_rate"] {
        old["stats"].as_object_mut().expect("stats").remove(key);
    }
    for u in old["utterances"].as_array_mut().expect("utterances") {
        let u = u.as_object_mut().expect("utterance");
        for key in [
            "copied_words_outside_quotes",
            "quotes_clause_aligned",
            "quotes_clause_aligned_rate",
        ] {
            assert!(u.remove(key).is_some(), "{key}");
        }
    }
    let old = TranscriptRecord::from_json(&old.to_string()).expect("an older transcript parses");
    assert_eq!(verify(&old, None).expect("verifies"), []);
}

const READING_STATS: [&str; 10] = [
    "meta_talk_turns",
    "unsupported_terms",
    "replies",
    "replies_answering",
    "on_topic_turns",
    "distinct_2",
    "quoting_turns",
    "quotes_carrying_claim",
    "quote_relevance",
    "clause_relevance",
];
const READING_FIELDS: [&str; 8] = [
    "meta_talk",
    "unsupported_terms",
    "answers_other",
    "on_topic",
    "distinct_2",
    "quote_carries_claim",
    "quote_relevance",
    "clause_relevance",
];
/// What `reading-v5` added: the quotes' reading, in the stats and per turn.
const READING_V5_STATS: [&str; 4] = [
    "quoting_turns",
    "quotes_carrying_claim",
    "quote_relevance",
    "clause_relevance",
];
const READING_V5_FIELDS: [&str; 3] = ["quote_carries_claim", "quote_relevance", "clause_relevance"];

/// A transcript as written before the reading measures existed.
fn strip_reading(transcript: &mut serde_json::Value) {
    transcript["settings"]
        .as_object_mut()
        .expect("settings")
        .remove("reading");
    for key in READING_STATS {
        transcript["stats"]
            .as_object_mut()
            .expect("stats")
            .remove(key);
    }
    for u in transcript["utterances"].as_array_mut().expect("utterances") {
        for key in READING_FIELDS {
            u.as_object_mut().expect("utterance").remove(key);
        }
    }
}

/// Each turn records how it reads (meta talk, unsupported terms, answering,
/// topic, distinct-2); the stats add them up; `verify` re-derives them,
/// catches a changed one, and a transcript from before them still verifies
/// with the measures absent, not zero.
#[test]
fn reading_measures_are_recorded_and_re_derived() {
    let mut a = FakeBook::new("nature/angler", RIVER);
    let mut b = FakeBook::new("fiction/whale", SEA);
    let mut model = FakeModel::new(&[Act::Good, Act::QuoteOther, Act::Good]);
    let moot = run_local(
        trees(),
        Some("the cold river".into()),
        settings(3),
        [&mut a, &mut b],
        &mut model,
        &mut |_| {},
    )
    .expect("moot runs");
    let readings: Vec<_> = moot
        .utterances
        .iter()
        .map(|u| u.reading.clone().expect("reading"))
        .collect();
    // `I hold that "..." [s1], as I have said [s2].`: no meta talk, no
    // names, nothing of the topic in its own words.
    assert!(readings.iter().all(|r| !r.meta_talk), "{readings:?}");
    assert!(readings.iter().all(|r| r.unsupported_terms.is_empty()));
    assert_eq!(readings[0].answers_other, None, "turn 1 answers nobody");
    assert!(readings[1].answers_other.is_some());
    assert!(!readings[0].on_topic);
    let stats = &moot.stats;
    assert_eq!(stats.meta_talk_turns, Some(0));
    assert_eq!(stats.unsupported_terms, Some(0));
    assert_eq!(stats.replies, Some(2));
    assert_eq!(stats.on_topic_turns, Some(0));
    // Three turns of `I hold that ... as I have said`: the same pairs.
    let d2 = stats.distinct_2.expect("distinct_2");
    assert!(d2 < 0.75, "{d2}");

    let record = TranscriptRecord::from(&moot);
    assert_eq!(record.settings.reading.as_deref(), Some("reading-v5"));
    let json = record.to_json_pretty();
    for key in READING_STATS.iter().chain(&READING_FIELDS) {
        assert!(json.contains(&format!("\"{key}\"")), "{key}");
    }
    let parsed = TranscriptRecord::from_json(&json).expect("parses");
    assert_eq!(verify(&parsed, None).expect("verifies"), []);
    let mut tampered = parsed.clone();
    tampered.utterances[2].meta_talk = Some(true);
    let mismatches = verify(&tampered, None).expect("verifies");
    assert!(
        mismatches.iter().any(|m| m.what.contains("reading")),
        "{mismatches:?}"
    );
    let mut tampered = parsed.clone();
    tampered.stats.on_topic_turns = Some(3);
    assert!(!verify(&tampered, None).expect("verifies").is_empty());

    // Written under `reading-v4`, before the quotes' reading: it verifies
    // with those measures absent, not zero.
    let mut v4: serde_json::Value = serde_json::from_str(&json).expect("json");
    v4["settings"]["reading"] = serde_json::Value::from("reading-v4");
    for key in READING_V5_STATS {
        v4["stats"].as_object_mut().expect("stats").remove(key);
    }
    for u in v4["utterances"].as_array_mut().expect("utterances") {
        for key in READING_V5_FIELDS {
            u.as_object_mut().expect("utterance").remove(key);
        }
    }
    let v4 = TranscriptRecord::from_json(&v4.to_string()).expect("a reading-v4 transcript parses");
    assert_eq!(verify(&v4, None).expect("verifies"), []);
    assert_eq!(
        (v4.stats.quotes_carrying_claim, v4.stats.quote_relevance),
        (None, None)
    );
    let mut tampered = parsed.clone();
    tampered.utterances[0].quote_carries_claim = Some(true);
    assert!(
        verify(&tampered, None)
            .expect("verifies")
            .iter()
            .any(|m| m.what.contains("reading of quotes")),
    );

    let mut old: serde_json::Value = serde_json::from_str(&json).expect("json");
    strip_reading(&mut old);
    let old = TranscriptRecord::from_json(&old.to_string()).expect("an older transcript parses");
    assert_eq!(verify(&old, None).expect("verifies"), []);
    assert_eq!(old.stats.meta_talk_turns, None);
    assert_eq!(old.stats.distinct_2, None);
    let again = old.to_json_pretty();
    for key in READING_STATS.iter().chain(&READING_FIELDS) {
        assert!(
            !again.contains(&format!("\"{key}\"")),
            "{key} written as absent"
        );
    }
    // A transcript written under reading-v1 is read with v1's lists (its
    // turns hold no v2-only meta talk, so the figures agree).
    let mut v1 = v4.clone();
    v1.settings.reading = Some("reading-v1".into());
    assert_eq!(verify(&v1, None).expect("verifies"), []);
    // A transcript that names reading measures this grove does not know.
    let mut unknown = parsed.clone();
    unknown.settings.reading = Some("reading-v9".into());
    let mismatches = verify(&unknown, None).expect("verifies");
    assert!(
        mismatches.iter().any(|m| m.what.contains("reading-v9")),
        "{mismatches:?}"
    );
}

#[test]
fn the_prompt_carries_persona_passages_and_moves() {
    let mut a = FakeBook::new("nature/angler", RIVER);
    let mut b = FakeBook::new("fiction/whale", SEA);
    let mut model = FakeModel::new(&[]);
    let moot = run_local(
        trees(),
        None,
        settings(3),
        [&mut a, &mut b],
        &mut model,
        &mut |_| {},
    )
    .expect("moot runs");
    let first = &model.requests[0];
    assert_eq!(first.messages[0].role, Role::System);
    // A person, not a book, and the book's own lines, tagged.
    let persona = &first.messages[0].content;
    assert!(
        persona.starts_with("You are a wise person talking with a friend."),
        "{persona}"
    );
    assert!(persona.contains("\n\nYou remember:\n\n[s1] "), "{persona}");
    assert!(
        !persona.contains("Compleat") && !persona.contains("Walton"),
        "{persona}"
    );
    assert!(
        !persona.contains("moot") && !persona.contains("chunk:"),
        "{persona}"
    );
    // The question it answers, alone.
    assert_eq!(first.messages[1].content, "What do you think?");
    // With no topic, the opening searches are on each book's title.
    assert_eq!(a.queries[0].0, "The Compleat Angler");
    assert_eq!(b.queries[0].0, "Moby Dick");
    // A reply reads the other book's last line (tags left out), then its
    // question; turn 3 of 3 closes.
    let third = &model.requests[2].messages[1].content;
    let said: String = moot.utterances[1].text.chars().take(12).collect();
    assert!(third.starts_with(&said), "{third}");
    let line = third.split("\n\n").next().unwrap_or_default();
    assert!(!line.contains("[s"), "{third}");
    assert!(
        third.ends_with("\n\nWhat do you believe, in the end?"),
        "{third}"
    );
}

#[test]
fn cited_passages_go_to_the_back_across_turns() {
    let mut a = FakeBook::new("nature/angler", RIVER);
    let mut b = FakeBook::new("fiction/whale", SEA);
    let mut model = FakeModel::new(&[]);
    let moot = run_local(
        trees(),
        Some("river".into()),
        settings(5),
        [&mut a, &mut b],
        &mut model,
        &mut |_| {},
    )
    .expect("moot runs");
    // Everything turn 1 cited is behind uncited passages in turn 3, as long
    // as the search had uncited ones to offer.
    let cited: Vec<&String> = moot.utterances[0].cited.values().collect();
    let third = &moot.utterances[2];
    let first_cited_position = third
        .retrieved
        .iter()
        .position(|p| cited.contains(&&p.passage.node_id));
    if let Some(pos) = first_cited_position {
        assert!(
            third.retrieved[pos..]
                .iter()
                .all(|p| cited.contains(&&p.passage.node_id))
        );
    }
    assert!(!cited.contains(&&third.retrieved[0].passage.node_id));
}

#[test]
fn no_text_twice_is_an_error_naming_the_book() {
    let mut a = FakeBook::new("nature/angler", RIVER);
    let mut b = FakeBook::new("fiction/whale", SEA);
    let mut model = FakeModel::new(&[Act::Empty, Act::Empty]);
    let err = run_local(
        trees(),
        None,
        settings(2),
        [&mut a, &mut b],
        &mut model,
        &mut |_| {},
    )
    .expect_err("fails");
    assert!(matches!(err, MootError::NoText { .. }));
    let message = err.to_string();
    assert!(
        message.contains("nature/angler") && message.contains("endpoint"),
        "{message}"
    );
}

#[test]
fn the_same_book_twice_is_refused() {
    let mut a = FakeBook::new("nature/angler", RIVER);
    let mut b = FakeBook::new("nature/angler", RIVER);
    let mut model = FakeModel::new(&[]);
    let t = Tree::new("nature/angler", "The Compleat Angler", "Izaak Walton");
    let err = run_local(
        [t.clone(), t],
        None,
        settings(2),
        [&mut a, &mut b],
        &mut model,
        &mut |_| {},
    )
    .expect_err("refused");
    assert!(matches!(err, MootError::SameBook(_)));
    assert!(model.requests.is_empty());
}

/// A speaker that claims its turns are grounded whatever they say.
struct Boastful<'a>(grove::moot::host::LocalSpeaker<'a>);

impl grove::moot::host::Speaker for Boastful<'_> {
    fn opening(&mut self, query: &str, k: usize) -> Result<Vec<Passage>, MootError> {
        self.0.opening(query, k)
    }
    /// Its claim goes through the host's checks like any speaker's: an
    /// `Accepted` is made there alone.
    fn turn(
        &mut self,
        call: &grove::moot::host::TurnCall,
    ) -> Result<grove::moot::host::Accepted, MootError> {
        let mut u = self.0.turn(call)?.into_utterance();
        u.grounded = true;
        u.grounding.counts.quotes_found = u.grounding.counts.quotes_total;
        grove::moot::host::check_turn(call, u)
    }
}

#[test]
fn the_host_rechecks_what_a_speaker_claims() {
    use grove::moot::host::{LocalSpeaker, run};
    let mut a = FakeBook::new("nature/angler", RIVER);
    let mut b = FakeBook::new("fiction/whale", SEA);
    // Turn 1 is honest and good; turn 2 misquotes twice and claims success.
    let mut model_a = FakeModel::new(&[Act::Good]);
    let mut model_b = FakeModel::new(&[Act::Misquote, Act::Misquote]);
    let mut narrator = FakeModel::new(&[]);
    let mut speaker_a = LocalSpeaker {
        book: "nature/angler".into(),
        retriever: &mut a,
        model: &mut model_a,
    };
    let mut speaker_b = Boastful(LocalSpeaker {
        book: "fiction/whale".into(),
        retriever: &mut b,
        model: &mut model_b,
    });
    let err = run(
        trees().to_vec(),
        None,
        settings(2),
        vec![&mut speaker_a, &mut speaker_b],
        &mut narrator,
        &mut |_| {},
    )
    .expect_err("caught");
    let message = err.to_string();
    assert!(
        message.contains("fiction/whale") && message.contains("re-check"),
        "{message}"
    );
}

/// A book read from the test corpus, packed into ~200-word passages
/// (a test stand-in for the store's chunker).
fn corpus_book(key: &str, file: &str) -> FakeBook {
    let path = crate::support::data_file(&format!("corpus/{file}"));
    let text = std::fs::read_to_string(&path).unwrap();
    let mut chunks = Vec::new();
    let mut current: Vec<String> = Vec::new();
    let mut words = 0;
    for p in text.replace("\r\n", "\n").split("\n\n") {
        let p = p.split_whitespace().collect::<Vec<_>>().join(" ");
        let n = p.split_whitespace().count();
        if n == 0 {
            continue;
        }
        if words > 0 && words + n > 200 {
            chunks.push(current.join("\n\n"));
            current.clear();
            words = 0;
        }
        current.push(p);
        words += n;
        if chunks.len() >= 400 {
            break;
        }
    }
    FakeBook {
        key: key.to_string(),
        chunks,
        queries: Vec::new(),
    }
}

/// Quotes runs of words from the passage lines it is shown, sometimes
/// misquoted, sometimes under a wrong tag, sometimes quoting the other book.
struct CopyingModel {
    state: u64,
}

impl CopyingModel {
    fn next(&mut self, n: usize) -> usize {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        (self.state % n.max(1) as u64) as usize
    }
}

impl ChatModel for CopyingModel {
    fn complete(&mut self, request: &ChatRequest) -> Result<String, ModelError> {
        // The passages (system message) and the other's line (user message).
        let user = &format!(
            "{}\n{}",
            request.messages[0].content, request.messages[1].content
        );
        if request.messages[0].content.contains("neutral narrator") {
            return Ok("Two books disagree about almost everything.".into());
        }
        let lines: Vec<&str> = user
            .lines()
            .filter(|l| {
                !l.starts_with("[s")
                    && !l.starts_with("Turn ")
                    && l.split_whitespace().count() >= 12
            })
            .collect();
        let mut reply = String::from("Hear me.");
        for _ in 0..1 + self.next(3) {
            if lines.is_empty() {
                break;
            }
            let line = lines[self.next(lines.len())];
            let words: Vec<&str> = line.split_whitespace().collect();
            let len = 2 + self.next(10);
            let start = self.next(words.len() - len);
            let mut quote: Vec<String> = words[start..start + len]
                .iter()
                .map(|w| w.to_string())
                .collect();
            if self.next(3) == 0 {
                let at = self.next(len);
                quote[at] = "otherwise".into();
            }
            let tag = 1 + self.next(7);
            reply.push_str(&format!(" \u{201c}{}\u{201d} [s{tag}].", quote.join(" ")));
        }
        if let Some(said) = user.split(" has just said: ").nth(1) {
            let words: Vec<&str> = said.split_whitespace().take(6).collect();
            let turn = user
                .split(" has just said: ")
                .next()
                .and_then(|head| head.rsplit("Turn ").next())
                .and_then(|t| t.split(',').next())
                .and_then(|t| t.trim().parse::<u32>().ok())
                .unwrap_or(1);
            if words.len() >= 3 {
                reply.push_str(&format!(" You said \"{}\" [o{turn}].", words.join(" ")));
            }
        }
        Ok(reply)
    }

    fn describe(&self) -> String {
        "fake:copying".into()
    }
}

#[test]
fn a_moot_on_real_books_verifies_from_its_transcript() {
    let mut a = corpus_book(
        "fiction/pride-and-prejudice",
        "pride-and-prejudice-1342-excerpt.txt",
    );
    let mut b = corpus_book("fiction/moby-dick", "moby-dick-2701-excerpt.txt");
    let trees = [
        Tree::new(
            "fiction/pride-and-prejudice",
            "Pride and Prejudice",
            "Jane Austen",
        ),
        Tree::new(
            "fiction/moby-dick",
            "Moby Dick; Or, The Whale",
            "Herman Melville",
        ),
    ];
    for seed in [1u64, 7, 42] {
        let mut model = CopyingModel {
            state: 0x9E37_79B9 ^ seed,
        };
        let moot = run_local(
            trees.clone(),
            Some("marriage and fortune".into()),
            MootSettings {
                turns: 8,
                k: 4,
                ..MootSettings::default()
            },
            [&mut a, &mut b],
            &mut model,
            &mut |_| {},
        )
        .expect("moot runs");
        let record = TranscriptRecord::from(&moot);
        let parsed = TranscriptRecord::from_json(&record.to_json_pretty()).expect("parses");
        let mismatches = verify(&parsed, None).expect("verifies");
        assert!(mismatches.is_empty(), "seed {seed}: {mismatches:?}");
        assert_eq!(moot.summaries.len(), 1);
        assert!(moot.stats.quotes_total > 0);
    }
}

/// A generated Gutenberg-style book as a [`FakeBook`]: one chunk per
/// paragraph, line breaks kept (search never comes back empty, unlike a
/// store search for words a 40-word book does not have).
fn generated_fake_book(key: &str, title: &str, seed: u64) -> FakeBook {
    let text = crate::support::generated_book(title, "A. Writer", 100 + seed, 30, seed);
    let body = text
        .split("*** START")
        .nth(1)
        .and_then(|t| t.split("*** END").next())
        .unwrap_or_default();
    FakeBook {
        key: key.to_string(),
        chunks: body
            .split("\n\n")
            .skip(1)
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect(),
        queries: Vec::new(),
    }
}

/// A short moot on the embedded model, guided (the default): every turn
/// cites valid tags and quotes its passages verbatim on the first try, in
/// quotes that end at a clause boundary, copies no run of words outside
/// them, the utterances record guidance, and the transcript verifies.
#[test]
fn a_guided_moot_on_the_embedded_model_grounds_every_turn() {
    let Some(path) = crate::model::embedded_model_file() else {
        crate::support::skip("no embedded model (set GROVE_TEST_STATE or GROVE_TEST_MODEL)");
        return;
    };
    let mut model = grove::model::embedded::EmbeddedModel::load(
        &path,
        grove::model::embedded::EmbeddedOptions::default(),
    )
    .expect("load model");
    assert!(model.guides_decoding());
    let mut a = generated_fake_book("fiction/sea-tales", "Sea Tales", 3);
    let mut b = generated_fake_book("essays/field-notes", "Field Notes", 4);
    let moot = run_local(
        [
            Tree::new("fiction/sea-tales", "Sea Tales", "A. Writer"),
            Tree::new("essays/field-notes", "Field Notes", "B. Writer"),
        ],
        Some("the sea".into()),
        MootSettings {
            turns: 3,
            k: 3,
            max_tokens: 80,
            ..MootSettings::default()
        },
        [&mut a, &mut b],
        &mut model,
        &mut |_| {},
    )
    .expect("moot runs");
    for u in &moot.utterances {
        let (turn, raw, g) = (u.turn, &u.raw_text, &u.grounding.counts);
        assert!(u.guided, "turn {turn}");
        assert!(g.tags_valid, "turn {turn}: {raw}");
        assert!((1..=3).contains(&g.quotes_total), "turn {turn}: {raw}");
        assert_eq!(g.quotes_found, g.quotes_total, "turn {turn}: {raw}");
        assert_eq!(u.attempts, 1, "turn {turn}: {raw}");
        assert!(u.grounded, "turn {turn}: {raw}");
        assert!(u.snaps.is_empty(), "turn {turn}: {raw}");
        // Its own words outside quotes, and quotes that read as quotations.
        let f = u.figures.expect("figures");
        assert_eq!(f.copied_words_outside_quotes, 0, "turn {turn}: {raw}");
        assert_eq!(f.quotes_clause_aligned, f.quotes, "turn {turn}: {raw}");
        // Own words a person reads as plain prose: no meta talk, no word
        // that is neither English nor the sources' (reading-v3), no colons,
        // ellipses, asides or double spaces.
        let r = u.reading.as_ref().expect("reading");
        assert!(!r.meta_talk, "turn {turn}: {raw}");
        assert!(r.unsupported_terms.is_empty(), "turn {turn}: {raw}");
        let own = grove::model::guide::words::outside_quotes(raw).join(" | ");
        for mark in [":", "..", "\u{2026}", "(", "*"] {
            assert!(!own.contains(mark), "turn {turn}: {mark:?} in {raw}");
        }
        assert!(!raw.contains("  "), "turn {turn}: {raw}");
    }
    let stats = &moot.stats;
    assert_eq!(stats.meta_talk_turns, Some(0));
    assert_eq!(stats.unsupported_terms, Some(0));
    assert_eq!(stats.guided_turns, 3);
    assert_eq!(stats.tags_valid_rate, Some(1.0));
    assert_eq!(stats.quote_found_rate, Some(1.0));
    assert_eq!(stats.retried_turns, 0);
    assert_eq!(stats.copied_words_outside_quotes, Some(0));
    assert_eq!(stats.quotes_clause_aligned_rate, Some(1.0));
    let record = TranscriptRecord::from(&moot);
    let parsed = TranscriptRecord::from_json(&record.to_json_pretty()).expect("parses");
    assert!(parsed.utterances.iter().all(|u| u.guided));
    assert_eq!(verify(&parsed, None).expect("verifies"), []);
}

/// `model.guided` reaches the model through the config, and the transcript
/// of `grove moot run` records it either way (one turn: its search is the
/// topic, which the generated books hold).
#[test]
fn moot_run_records_whether_guidance_was_on() {
    let Some(model) = crate::model::embedded_model_file() else {
        crate::support::skip("no embedded model (set GROVE_TEST_STATE or GROVE_TEST_MODEL)");
        return;
    };
    let g = crate::support::Grove::new();
    for (file, key, title, seed) in [
        ("a.txt", "fiction/sea-tales", "Sea Tales", 3),
        ("b.txt", "essays/field-notes", "Field Notes", 4),
    ] {
        let book = g.write(
            file,
            crate::support::generated_book(title, "A. Writer", 100 + seed, 40, seed).as_bytes(),
        );
        g.ok(&["book", "add", book.to_str().unwrap(), "--key", key]);
    }
    let out_file = g.state().join("moot.json");
    for guided in [true, false] {
        let out = g
            .cmd(&[
                "moot",
                "run",
                "--a",
                "fiction/sea-tales",
                "--b",
                "essays/field-notes",
                "--topic",
                "the sea",
                "--turns",
                "1",
                "-k",
                "3",
                "--max-tokens",
                if guided { "64" } else { "24" },
                "--out",
                out_file.to_str().unwrap(),
                "--json",
            ])
            .env("GROVE_MODEL__PATH", &model)
            .env("GROVE_MODEL__GUIDED", guided.to_string())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let transcript: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("the transcript");
        let u = &transcript["utterances"][0];
        assert_eq!(u["guided"], guided, "{u}");
        assert_eq!(transcript["stats"]["guided_turns"], u32::from(guided));
        if guided {
            assert_eq!(u["grounded"], true, "{u}");
            assert_eq!(u["attempts"], 1, "{u}");
        }
        let verified = g.ok(&["moot", "verify", out_file.to_str().unwrap()]);
        assert!(verified.contains("ok:"), "{verified}");
    }
}

/// A speaker whose node passes on some turns (as a `grounded-only` policy
/// would) and speaks on the others; `boast` makes its passes claim
/// grounding they do not have.
struct Passing<'a> {
    inner: grove::moot::host::LocalSpeaker<'a>,
    pass_on: Vec<u32>,
    boast: bool,
}

impl grove::moot::host::Speaker for Passing<'_> {
    fn opening(&mut self, query: &str, k: usize) -> Result<Vec<Passage>, MootError> {
        self.inner.opening(query, k)
    }
    fn turn(
        &mut self,
        call: &grove::moot::host::TurnCall,
    ) -> Result<grove::moot::host::Accepted, MootError> {
        use grove::moot::host::check_turn;
        use grove::moot::policy::{Decision, PolicySettings, decide};
        use grove::moot::speaker;
        if !self.pass_on.contains(&call.request.turn) {
            let mut u = self.inner.turn(call)?.into_utterance();
            u.decision = Some(decide(&PolicySettings::default(), None, 0));
            return check_turn(call, u);
        }
        let request = self.inner.prepare(call)?;
        let decision = Decision {
            speak: false,
            policy: "grounded-only".into(),
            reason: "best passage scores 0.500, not above 1.000".into(),
            ms: 2,
        };
        let mut u = speaker::pass(&request, decision);
        if self.boast {
            u.grounded = true;
        }
        check_turn(call, u)
    }
}

fn run_with_passes(
    pass_a: &[u32],
    pass_b: &[u32],
    boast: bool,
    turns: u32,
) -> Result<grove::moot::host::Moot, MootError> {
    let mut a = FakeBook::new("nature/angler", RIVER);
    let mut b = FakeBook::new("fiction/whale", SEA);
    let mut model_a = FakeModel::new(&[]);
    let mut model_b = FakeModel::new(&[]);
    let mut narrator = FakeModel::new(&[]);
    let mut speaker_a = Passing {
        inner: grove::moot::host::LocalSpeaker {
            book: "nature/angler".into(),
            retriever: &mut a,
            model: &mut model_a,
        },
        pass_on: pass_a.to_vec(),
        boast: false,
    };
    let mut speaker_b = Passing {
        inner: grove::moot::host::LocalSpeaker {
            book: "fiction/whale".into(),
            retriever: &mut b,
            model: &mut model_b,
        },
        pass_on: pass_b.to_vec(),
        boast,
    };
    grove::moot::host::run(
        trees().to_vec(),
        Some("rivers".into()),
        settings(turns),
        vec![&mut speaker_a, &mut speaker_b],
        &mut narrator,
        &mut |_| {},
    )
}

#[test]
fn a_pass_is_a_turn_without_text_and_the_next_speaker_answers_the_last_real_line() {
    use grove::moot::speaker::turn_query;
    // B passes turn 2: A answers its own turn 1 line on turn 3, B answers
    // turn 3 on turn 4.
    let moot = run_with_passes(&[], &[2], false, 5).expect("moot runs");
    let u = &moot.utterances;
    assert_eq!(u.len(), 5);
    assert!(u[1].passed());
    assert_eq!(u[1].speaker, "fiction/whale");
    assert!(u[1].text.is_empty() && u[1].raw_text.is_empty());
    assert_eq!(u[1].attempts, 0);
    assert!(
        !u[1].retrieved.is_empty(),
        "a pass records what it looked at"
    );
    assert_eq!(u[2].query, turn_query(Some("rivers"), &u[0].text));
    assert_eq!(u[3].query, turn_query(Some("rivers"), &u[2].text));
    assert!(u.iter().all(|u| u.decision.is_some()));
    assert_eq!(moot.stats.turns, 5);
    assert_eq!(moot.stats.passed_turns, 1);
    assert_eq!(moot.stats.grounded_turns, 4);
    assert_eq!(moot.stats.tags_valid_rate, Some(1.0));

    let record = TranscriptRecord::from(&moot);
    let json = record.to_json_pretty();
    assert!(json.contains("\"action\": \"pass\""), "{json}");
    let parsed = TranscriptRecord::from_json(&json).expect("parses back");
    assert_eq!(parsed, record);
    let mismatches = verify(&parsed, None).expect("verifies");
    assert!(mismatches.is_empty(), "{mismatches:?}");
    // A pass that says something, or a pass turned into speech, is caught.
    let mut tampered = parsed.clone();
    tampered.utterances[1].text = "I had something to say after all.".into();
    let found = verify(&tampered, None).expect("verifies");
    assert!(found.iter().any(|m| m.what.contains("pass")), "{found:?}");
    let mut tampered = parsed.clone();
    tampered.utterances[1].decision.as_mut().unwrap().action = "speak".into();
    assert!(!verify(&tampered, None).expect("verifies").is_empty());
    let mut tampered = parsed;
    tampered.stats.passed_turns = 0;
    assert!(!verify(&tampered, None).expect("verifies").is_empty());

    // A passes the opening: B opens from its own opening passages.
    let moot = run_with_passes(&[1], &[], false, 4).expect("moot runs");
    let u = &moot.utterances;
    assert!(u[0].passed());
    assert_eq!(u[1].query, "rivers");
    let opening_b: Vec<_> = moot.openings[1]
        .passages
        .iter()
        .map(|p| p.node_id.clone())
        .collect();
    let spoken: Vec<_> = u[1]
        .retrieved
        .iter()
        .map(|t| t.passage.node_id.clone())
        .collect();
    assert_eq!(spoken, opening_b);
    let mismatches = verify(&TranscriptRecord::from(&moot), None).expect("verifies");
    assert!(mismatches.is_empty(), "{mismatches:?}");
}

#[test]
fn a_pass_claiming_grounding_is_refused_by_the_host() {
    let err = run_with_passes(&[], &[2], true, 3).expect_err("caught");
    let message = err.to_string();
    assert!(
        message.contains("fiction/whale") && message.contains("a pass"),
        "{message}"
    );
}
