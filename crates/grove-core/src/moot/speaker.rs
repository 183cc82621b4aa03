//! One tree's turn: retrieval (cited passages to the back), the prompt, the
//! model call, grading, one retry with a reminder, snapping, the utterance.
//!
//! Pure except for calls through [`Retriever`] and [`ChatModel`]; a later
//! issue runs this on the node holding the book, unchanged.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use super::policy::Decision;
use super::prompt::{self, Cue, Line};
use super::reading::{self, TurnReading};
use super::stats::{self, TurnFigures};
use super::{MootError, Move, Passage, Retriever, TaggedPassage, Tree, Utterance};
use crate::chat::{ChatMessage, ChatModel, ChatRequest, Guidance, Role};
use crate::grounding::{self, Tag, TurnSources};
use crate::guide::words::COPY_RUN_WORDS;

/// Replies a guided model drafts per turn; the one that reads best
/// ([`reading::draft_score`]) is kept (and retried if it does not pass).
/// Five, not three: with three, one of two 8-turn moots kept turns whose
/// every draft talked about the exchange ("…" [s5]; I removed it."); five
/// cost 1.15–1.47x the CPU per turn (`docs/guided-moot-example.md`).
pub const CANDIDATES: u32 = 5;

/// Everything a speaker needs for one turn.
#[derive(Debug, Clone)]
pub struct TurnRequest {
    /// 1-based turn number.
    pub turn: u32,
    pub speaker: Tree,
    pub other: Tree,
    pub topic: Option<String>,
    /// The search query that gave this turn's passages.
    pub query: String,
    /// This turn's passages, in rank order; tagged `s1..sk` here.
    pub passages: Vec<Passage>,
    /// The speaker's pool: every passage its book returned so far,
    /// this turn's included, each once, in arrival order.
    pub pool: Vec<Passage>,
    /// Stored texts of the other tree's earlier turns.
    pub other_turns: BTreeMap<u64, String>,
    /// Stored texts of the speaker's earlier turns.
    pub own_turns: BTreeMap<u64, String>,
    /// The other tree's last line (absent on turn 1).
    pub incoming: Option<Line>,
    /// The two turns before the incoming one.
    pub recent: Vec<Line>,
    pub summary: Option<String>,
    pub mv: Move,
    pub temperature: f64,
    pub max_tokens: u32,
    /// Seed of the first attempt; the retry uses `seed + 1`.
    pub seed: u64,
}

impl TurnRequest {
    /// The request with this turn's passages, added to the pool: what a
    /// speaker does with what it retrieved (or was given), on the host's
    /// node or the book's.
    pub fn with_passages(mut self, passages: Vec<Passage>) -> TurnRequest {
        extend_pool(&mut self.pool, &passages);
        self.passages = passages;
        self
    }
}

/// The query of a later turn: `topic + " " + line`, or the line alone.
pub fn turn_query(topic: Option<&str>, other_line: &str) -> String {
    match topic.map(str::trim).filter(|t| !t.is_empty()) {
        Some(topic) => format!("{topic} {other_line}"),
        None => other_line.to_string(),
    }
}

/// The opening query: the topic, or the book's own title.
pub fn opening_query(topic: Option<&str>, tree: &Tree) -> String {
    match topic.map(str::trim).filter(|t| !t.is_empty()) {
        Some(topic) => topic.to_string(),
        None => tree.name().to_string(),
    }
}

/// Searches the speaker's own book for `k` passages, asking for `3k` hits
/// and keeping uncited ones first (in rank order), then cited ones.
pub fn retrieve(
    retriever: &mut dyn Retriever,
    book: &str,
    query: &str,
    k: usize,
    cited: &BTreeSet<String>,
) -> Result<Vec<Passage>, MootError> {
    let hits = retriever
        .search(query, k.saturating_mul(3))
        .map_err(|source| MootError::Retrieve {
            book: book.to_string(),
            source,
        })?;
    let mut seen = BTreeSet::new();
    let hits: Vec<Passage> = hits
        .into_iter()
        .filter(|p| seen.insert(p.node_id.clone()))
        .collect();
    let (fresh, used): (Vec<Passage>, Vec<Passage>) =
        hits.into_iter().partition(|p| !cited.contains(&p.node_id));
    let passages: Vec<Passage> = fresh.into_iter().chain(used).take(k).collect();
    if passages.is_empty() {
        return Err(MootError::NoPassages {
            book: book.to_string(),
            query: query.to_string(),
        });
    }
    Ok(passages)
}

/// Adds passages to a pool, each node once, in arrival order.
pub fn extend_pool(pool: &mut Vec<Passage>, passages: &[Passage]) {
    for p in passages {
        if !pool.iter().any(|q| q.node_id == p.node_id) {
            pool.push(p.clone());
        }
    }
}

/// Tags passages `s1..sk` in order.
pub fn tag_passages(passages: &[Passage]) -> Vec<TaggedPassage> {
    passages
        .iter()
        .enumerate()
        .map(|(i, p)| TaggedPassage {
            tag: format!("s{}", i + 1),
            passage: p.clone(),
        })
        .collect()
}

/// A turn's passage tags and pool texts, owned, to lend to [`TurnSources`].
pub struct SourceParts {
    pub tags: Vec<String>,
    pub pool: Vec<String>,
}

impl SourceParts {
    pub fn new(tagged: &[TaggedPassage], pool: &[Passage]) -> SourceParts {
        SourceParts {
            tags: tagged.iter().map(|t| t.tag.clone()).collect(),
            pool: pool.iter().map(|p| p.content.clone()).collect(),
        }
    }
}

/// Grades and snaps `reply` against a turn's passages, pool and turn texts;
/// also returns `{tag: node_id}` for the valid `s` tags it cites.
pub fn record_reply(
    reply: &str,
    tagged: &[TaggedPassage],
    pool: &[Passage],
    other_turns: &BTreeMap<u64, String>,
    own_turns: &BTreeMap<u64, String>,
) -> (grounding::Checked, BTreeMap<String, String>) {
    let parts = SourceParts::new(tagged, pool);
    let tag_refs: Vec<&str> = parts.tags.iter().map(String::as_str).collect();
    let pool_refs: Vec<&str> = parts.pool.iter().map(String::as_str).collect();
    let sources = TurnSources {
        passage_tags: &tag_refs,
        pool: &pool_refs,
        other_turns,
        own_turns,
    };
    let checked = grounding::check(reply, &sources);
    let mut cited = BTreeMap::new();
    for tag in grounding::ParsedReply::parse(reply).tags() {
        if let Tag::Passage(name) = tag
            && let Some(t) = tagged.iter().find(|t| &t.tag == name)
        {
            cited.insert(name.clone(), t.passage.node_id.clone());
        }
    }
    (checked, cited)
}

/// The most words of a chosen quote: a longer clause is quoted by its last
/// words (it still ends where the clause does). Guidance gives the quote
/// no other place to end, so it must fit the turn's tokens with room for
/// the turn's own words (a turn is at most
/// [`MAX_REPLY_WORDS`](prompt::MAX_REPLY_WORDS) words).
pub const CHOSEN_QUOTE_WORDS: usize = 16;

/// The clause of a turn's passages the turn quotes, chosen before the
/// model speaks (evidence first): the model writes its own words around
/// the book's, rather than picking some clause of some passage to prop up
/// what it already said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChosenQuote {
    /// The tag of the passage it is from (`s2`).
    pub tag: String,
    /// The clause, verbatim.
    pub text: String,
    /// Its words the turn's own words should take up ([`carry_words`]).
    pub carry: Vec<String>,
}

/// How many of the best clauses a guided turn's drafts speak from, in
/// turn (draft `i` from clause `i mod QUOTES_DRAFTED`): the drafts' reading
/// then chooses the quote whose own words carry it, which the clause's
/// count of words cannot foresee.
pub const QUOTES_DRAFTED: usize = 3;

/// The quotes a turn may speak from, best first: every clause of its
/// passages ([`content::clauses_of`](crate::content::clauses_of); a clause
/// of more than [`CHOSEN_QUOTE_WORDS`] words as its last ones), ranked by the
/// distinct content words of the topic it holds, then of the topic and
/// of the other book's last quotes ([`reading::point_stems`], the measure
/// `quote_relevance` reads), then by its count of content words (a clause
/// that says something), the passages' rank order breaking ties. (Ranked
/// on the other's words first, the quotes chained on a word of the last
/// one, "double", turn after turn, and the talk followed them off the
/// topic.) A
/// clause the speaker quoted before comes after every other, and one with
/// no word for the own words to take up ([`carry_words`]: "Till we marry
/// thee" on marrying) after every other left. At most `n`, each once.
pub fn choose_quotes(
    request: &TurnRequest,
    tagged: &[TaggedPassage],
    n: usize,
) -> Vec<ChosenQuote> {
    let last_other = request.incoming.as_ref().map(|l| l.text.as_str());
    let wanted = reading::point_stems(request.topic.as_deref(), last_other);
    let topic = reading::point_stems(request.topic.as_deref(), None);
    let quoted_before: Vec<String> = request
        .own_turns
        .values()
        .flat_map(|t| reading::quoted_texts(t))
        .map(|q| grounding::norm(&q))
        .collect();
    let said = not_carried(request);
    let mut seen = std::collections::HashSet::new();
    let mut ranked: Vec<(QuoteRank, usize, ChosenQuote)> = Vec::new();
    for t in tagged {
        let text = &t.passage.content;
        for range in crate::content::clauses_of(text, CHOSEN_QUOTE_WORDS) {
            let clause = &text[range];
            let norm = grounding::norm(clause);
            // "…the sentiments which Mr" ends where a name follows.
            if ends_in_title(clause) || !seen.insert(norm.clone()) {
                continue;
            }
            let fresh = !quoted_before.iter().any(|q| norm.contains(q.as_str()));
            let carry = carry_words(clause, &said);
            let key = (
                fresh,
                !carry.is_empty(),
                crate::content::relevance(clause, &topic),
                crate::content::relevance(clause, &wanted),
                crate::content::content_stems(clause).len(),
            );
            let chosen = ChosenQuote {
                tag: t.tag.clone(),
                text: clause.to_string(),
                carry,
            };
            ranked.push((key, ranked.len(), chosen));
        }
    }
    // Best key first; among equals, the first found.
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    ranked.into_iter().take(n).map(|(_, _, q)| q).collect()
}

/// Whether a clause ends in a title (`Mr`, `Mrs`, `Dr`…): its boundary
/// is the title's full stop, and the name it belongs to is cut off.
fn ends_in_title(clause: &str) -> bool {
    let last = clause
        .rsplit(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or("");
    crate::guide::words::TITLE_ABBREVIATIONS.contains(&last)
}

/// How a clause ranks as a turn's quote, best highest: not quoted by the
/// speaker before, holding a word to take up, its relevance to the topic,
/// to the topic and the other's point, its count of content words.
type QuoteRank = (bool, bool, usize, usize, usize);

/// Speaks one turn: the quotes chosen, prompt, model, drafts, grade, one
/// retry, snap.
pub fn speak(model: &mut dyn ChatModel, request: &TurnRequest) -> Result<Utterance, MootError> {
    let tagged = tag_passages(&request.passages);
    let guided = model.guides_decoding();
    // Only guidance can hold a model to a chosen quote; a model that is not
    // guided chooses among its passages as before.
    let chosen = if guided {
        choose_quotes(request, &tagged, QUOTES_DRAFTED)
    } else {
        Vec::new()
    };
    let prompts: Vec<Prompt> = if chosen.is_empty() {
        vec![Prompt::new(request, &tagged, None)]
    } else {
        chosen
            .iter()
            .map(|q| Prompt::new(request, &tagged, Some(q)))
            .collect()
    };
    let mut turn = Turn {
        model,
        request,
        tagged,
        titles: titles(request),
    };
    // Under guidance every draft is grounded by construction, so drafts
    // differ in how they read: draft a few and keep the best read.
    let drafts = if guided { CANDIDATES } else { 1 };
    let (first, prompt) = turn.best_draft(&prompts, drafts)?;
    let kept = turn.keep_or_retry(&prompts[prompt], first)?;
    Ok(turn.utterance(kept, guided))
}

/// What one draft is asked with: the messages and the guidance, for a
/// chosen quote or (none) the turn's passages.
struct Prompt {
    messages: Vec<ChatMessage>,
    guidance: Guidance,
}

impl Prompt {
    fn new(
        request: &TurnRequest,
        tagged: &[TaggedPassage],
        chosen: Option<&ChosenQuote>,
    ) -> Prompt {
        Prompt {
            messages: turn_messages(request, tagged, chosen),
            guidance: turn_guidance(request, tagged, chosen),
        }
    }
}

/// A turn's first messages: the persona with its chosen quote (or, with
/// none, its passages), and the cue.
fn turn_messages(
    request: &TurnRequest,
    tagged: &[TaggedPassage],
    chosen: Option<&ChosenQuote>,
) -> Vec<ChatMessage> {
    let cue = match &request.incoming {
        None => Cue::Opening,
        Some(line) => Cue::Reply {
            incoming: line,
            mv: request.mv,
        },
    };
    vec![
        ChatMessage {
            role: Role::System,
            content: match chosen {
                Some(q) => prompt::persona_of_quote(request.topic.as_deref(), &q.tag, &q.text),
                None => prompt::persona(request.topic.as_deref(), tagged),
            },
        },
        ChatMessage {
            role: Role::User,
            content: prompt::user_message(&cue, request.topic.as_deref()),
        },
    ]
}

/// What a guiding backend needs: quotes may copy this turn's passages
/// (tagged s1..sk) or the other book's earlier turns (tagged oN), as the
/// grader reads them. Its own turns are left out: a book echoing itself
/// is how a small model loops. Outside quotes it may copy nothing of its
/// prompt (the messages sent, added per call, the topic aside:
/// [`prompt_runs`]) nor of any earlier turn; it may always name the two
/// books. With a chosen quote, the one quote is that clause, under its
/// passage's tag, and it ends the turn: own words, then the book's words
/// for them; the other book's turns are then texts not to copy.
fn turn_guidance(
    request: &TurnRequest,
    tagged: &[TaggedPassage],
    chosen: Option<&ChosenQuote>,
) -> Guidance {
    let mut avoid: Vec<String> = request.own_turns.values().cloned().collect();
    let (passages, passage_tags, turns) = match chosen {
        Some(q) => {
            avoid.extend(request.other_turns.values().cloned());
            (vec![q.text.clone()], vec![q.tag.clone()], BTreeMap::new())
        }
        None => (
            tagged.iter().map(|t| t.passage.content.clone()).collect(),
            Vec::new(),
            request.other_turns.clone(),
        ),
    };
    Guidance {
        passages,
        turns,
        max_words: prompt::MAX_REPLY_WORDS,
        avoid,
        exempt: titles(request),
        known_words: Some(known_words(request)),
        steer_words: request
            .topic
            .as_deref()
            .map(reading::topic_word_forms)
            .unwrap_or_default(),
        carry_words: chosen.map(|q| q.carry.clone()).unwrap_or_default(),
        banned_words: banned_words(request),
        passage_tags,
        claim_line: chosen.is_some(),
    }
}

/// The stems a chosen quote's words are not leaned towards: the topic's,
/// and those earlier turns' own words hold, so a word is not taken up turn
/// after turn.
fn not_carried(request: &TurnRequest) -> HashSet<String> {
    let mut said = (request.topic.as_deref())
        .map(crate::content::content_stems)
        .unwrap_or_default();
    let earlier = request
        .own_turns
        .values()
        .chain(request.other_turns.values());
    for stretch in earlier.flat_map(|t| reading::own_word_stretches(t)) {
        said.extend(stretch.iter().map(|w| crate::content::stem(w)));
    }
    said
}

/// The words of a chosen quote its turn's own words should take up: its
/// content words beyond the topic's (what `quote_carries_claim` reads) and
/// beyond `said` ([`not_carried`]). Names (capitalised past the quote's
/// first word) are left out: own words may not write them.
fn carry_words(quote: &str, said: &HashSet<String>) -> Vec<String> {
    let mut out: Vec<String> = quote
        .split_whitespace()
        .enumerate()
        .filter(|(i, w)| *i == 0 || !w.starts_with(char::is_uppercase))
        .flat_map(|(_, w)| crate::guide::words::words(w))
        .filter(|w| crate::content::is_content_word(w))
        .filter(|w| !said.contains(&crate::content::stem(w)))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The stretches of a prompt message whose runs free text may not copy:
/// the message split at each mention of the topic. The topic is the
/// turn's to say in its own sentence; refused a run of it ("should spend
/// their time"), a small model bends the phrase ("spend there time",
/// "people living for live"). Earlier turns' runs stay refused, topic
/// words and all, so the topic is not said the same way twice.
fn prompt_runs(message: &str, topic: Option<&str>) -> Vec<String> {
    match topic.map(str::trim).filter(|t| !t.is_empty()) {
        Some(topic) => message.split(topic).map(str::to_string).collect(),
        None => vec![message.to_string()],
    }
}

/// One turn being spoken: the model, the request and what every call,
/// grading and reading of it shares.
struct Turn<'m, 'r> {
    model: &'m mut dyn ChatModel,
    request: &'r TurnRequest,
    tagged: Vec<TaggedPassage>,
    titles: Vec<String>,
}

/// The reply a turn keeps, as graded, and the attempts it took.
struct Kept {
    raw: String,
    checked: grounding::Checked,
    cited: BTreeMap<String, String>,
    attempts: u32,
}

impl Turn<'_, '_> {
    /// One model call on `messages`, guided so that its own words copy
    /// none of them either.
    fn call(
        &mut self,
        messages: &[ChatMessage],
        guidance: &Guidance,
        seed: u64,
    ) -> Result<String, MootError> {
        let mut guidance = guidance.clone();
        let topic = self.request.topic.as_deref();
        guidance
            .avoid
            .extend(messages.iter().flat_map(|m| prompt_runs(&m.content, topic)));
        self.model
            .complete(&ChatRequest {
                messages: messages.to_vec(),
                max_tokens: self.request.max_tokens,
                temperature: self.request.temperature as f32,
                seed,
                guidance: Some(guidance),
            })
            .map_err(|source| MootError::Model {
                book: self.request.speaker.key.clone(),
                source,
            })
    }

    fn grade(&self, reply: &str) -> (grounding::Checked, BTreeMap<String, String>) {
        let request = self.request;
        record_reply(
            reply,
            &self.tagged,
            &request.pool,
            &request.other_turns,
            &request.own_turns,
        )
    }

    fn read(&self, text: &str) -> TurnReading {
        let request = self.request;
        turn_reading(
            text,
            &self.tagged,
            &request.own_turns,
            &request.other_turns,
            &self.titles,
            request.topic.as_deref(),
            request.incoming.as_ref().map(|l| l.text.as_str()),
            reading::ReadingVersion::CURRENT,
        )
    }

    /// Drafts `drafts` replies, draft `i` on prompt `i mod prompts`, and
    /// returns the one that reads best (the first of equals) with its
    /// prompt's index.
    fn best_draft(
        &mut self,
        prompts: &[Prompt],
        drafts: u32,
    ) -> Result<(String, usize), MootError> {
        let request = self.request;
        let earlier: Vec<&str> = request
            .own_turns
            .values()
            .chain(request.other_turns.values())
            .map(String::as_str)
            .collect();
        let mut first: Option<(f64, String, usize)> = None;
        for i in 0..drafts {
            let p = i as usize % prompts.len().max(1);
            let Some(prompt) = prompts.get(p) else {
                break;
            };
            let seed = request.seed.wrapping_add(u64::from(i) << 40);
            let reply = self.call(&prompt.messages, &prompt.guidance, seed)?;
            let (checked, _) = self.grade(&reply);
            let score =
                reading::draft_score(&self.read(&checked.text), checked.passes, has_text(&reply))
                    + reading::draft_shape_score(
                        &checked.text,
                        request.incoming.as_ref().map(|l| l.text.as_str()),
                        &earlier,
                        request.topic.as_deref(),
                    );
            if first.as_ref().is_none_or(|(best, ..)| score > *best) {
                first = Some((score, reply, p));
            }
        }
        Ok(first.map(|(_, reply, p)| (reply, p)).unwrap_or_default())
    }

    /// Keeps `first` if it passes; else asks once more with a reminder
    /// and keeps the second reply (or the first, if the second is empty).
    fn keep_or_retry(&mut self, prompt: &Prompt, first: String) -> Result<Kept, MootError> {
        let (first_checked, first_cited) = self.grade(&first);
        if first_checked.passes {
            return Ok(Kept {
                raw: first,
                checked: first_checked,
                cited: first_cited,
                attempts: 1,
            });
        }
        let tags: Vec<String> = self.tagged.iter().map(|t| t.tag.clone()).collect();
        let mut messages = prompt.messages.clone();
        messages.push(ChatMessage {
            role: Role::Assistant,
            content: first.clone(),
        });
        messages.push(ChatMessage {
            role: Role::User,
            content: prompt::reminder(&tags, &first_checked.grounding),
        });
        let second = self.call(
            &messages,
            &prompt.guidance,
            self.request.seed.wrapping_add(1),
        )?;
        let (raw, checked, cited) = if has_text(&second) {
            let (checked, cited) = self.grade(&second);
            (second, checked, cited)
        } else if has_text(&first) {
            (first, first_checked, first_cited)
        } else {
            return Err(MootError::NoText {
                book: self.request.speaker.key.clone(),
            });
        };
        Ok(Kept {
            raw,
            checked,
            cited,
            attempts: 2,
        })
    }

    /// The utterance of the kept reply, with its figures and reading.
    fn utterance(self, kept: Kept, guided: bool) -> Utterance {
        let request = self.request;
        let figures = turn_figures(
            &kept.checked.text,
            &self.tagged,
            &request.own_turns,
            &request.other_turns,
            &self.titles,
            COPY_RUN_WORDS,
        );
        let reading = self.read(&kept.checked.text);
        let checked = kept.checked;
        Utterance {
            turn: request.turn,
            speaker: request.speaker.key.clone(),
            title: request.speaker.name().to_string(),
            figures: Some(figures),
            reading: Some(reading),
            text: checked.text,
            cited: kept.cited,
            grounded: checked.passes,
            grounding: checked.grounding,
            attempts: kept.attempts,
            query: request.query.clone(),
            retrieved: self.tagged,
            raw_text: kept.raw,
            snaps: checked.snaps,
            intent: request.mv,
            guided,
            decision: None,
        }
    }
}

/// A pass: the tree's node decided not to speak. The turn is recorded with
/// no text, with the passages its policy looked at (so pools grow as when it
/// speaks) and the grading of an empty reply.
pub fn pass(request: &TurnRequest, decision: Decision) -> Utterance {
    let tagged = tag_passages(&request.passages);
    let (checked, _) = record_reply(
        "",
        &tagged,
        &request.pool,
        &request.other_turns,
        &request.own_turns,
    );
    Utterance {
        turn: request.turn,
        speaker: request.speaker.key.clone(),
        title: request.speaker.name().to_string(),
        text: String::new(),
        cited: BTreeMap::new(),
        grounded: false,
        grounding: checked.grounding,
        attempts: 0,
        query: request.query.clone(),
        retrieved: tagged,
        raw_text: String::new(),
        snaps: Vec::new(),
        intent: request.mv,
        guided: false,
        decision: Some(decision),
        figures: None,
        reading: None,
    }
}

/// The words a turn may write outside quotes beyond English words, and
/// the only ones it may write as a capitalised name inside a sentence: the
/// titles' and the topic's. Stricter than what `unsupported_terms` counts
/// (which also takes the passages' and earlier turns' words): given leave
/// to name what its passages name, the 135M model narrates them ("The
/// Duchess is not one to be taken lightly", from the other book's quote);
/// their names stay quotable.
pub fn known_words(request: &TurnRequest) -> Vec<String> {
    let titles = titles(request);
    let titles: Vec<&str> = titles.iter().map(String::as_str).collect();
    reading::supported_words(&reading::ReadingSources {
        passages: &[],
        earlier: &[],
        titles: &titles,
        topic: request.topic.as_deref(),
        last_other: None,
        version: reading::ReadingVersion::CURRENT,
    })
    .into_iter()
    .collect()
}

/// The words guidance keeps out of a turn's own words: the meta-talk words
/// of the reading measures ([`reading::ReadingVersion::meta_talk_lists`]),
/// less those the titles or the topic hold (a book may always name itself,
/// the other and the topic).
pub fn banned_words(request: &TurnRequest) -> Vec<String> {
    let (meta, _) = reading::ReadingVersion::CURRENT.meta_talk_lists();
    let mut named: Vec<String> = titles(request)
        .iter()
        .flat_map(|t| crate::guide::words::words(t))
        .collect();
    if let Some(topic) = request.topic.as_deref() {
        named.extend(crate::guide::words::words(topic));
    }
    meta.into_iter()
        .filter(|w| !named.iter().any(|n| n == w))
        .map(str::to_string)
        .collect()
}

/// The books a turn may always name: the speaker's and the addressed one's
/// titles (keys when untitled).
pub fn titles(request: &TurnRequest) -> Vec<String> {
    vec![
        request.speaker.name().to_string(),
        request.other.name().to_string(),
    ]
}

/// What a turn's own words are read against, as text: its passages, the
/// moot's earlier turns (both speakers') and the books it may name.
fn texts_read<'a>(
    tagged: &'a [TaggedPassage],
    own_turns: &'a BTreeMap<u64, String>,
    other_turns: &'a BTreeMap<u64, String>,
    titles: &'a [String],
) -> (Vec<&'a str>, Vec<&'a str>, Vec<&'a str>) {
    let passages = tagged.iter().map(|t| t.passage.content.as_str()).collect();
    let earlier = own_turns
        .values()
        .chain(other_turns.values())
        .map(String::as_str)
        .collect();
    (
        passages,
        earlier,
        titles.iter().map(String::as_str).collect(),
    )
}

/// A turn's own-words figures ([`stats::turn_figures`]) from its passages,
/// the moot's earlier turns (both maps) and the books it may name.
pub fn turn_figures(
    text: &str,
    tagged: &[TaggedPassage],
    own_turns: &BTreeMap<u64, String>,
    other_turns: &BTreeMap<u64, String>,
    titles: &[String],
    copy_run_words: usize,
) -> TurnFigures {
    let (passages, earlier, titles) = texts_read(tagged, own_turns, other_turns, titles);
    stats::turn_figures(text, &passages, &earlier, &titles, copy_run_words)
}

/// A turn's reading measures ([`reading::read_turn`]) from its passages,
/// the moot's earlier turns (both maps), the books it may name, the topic
/// and the last line it answers.
// One argument per source of the reading, as `verify` rebuilds each of
// them separately.
#[allow(clippy::too_many_arguments)]
pub fn turn_reading(
    text: &str,
    tagged: &[TaggedPassage],
    own_turns: &BTreeMap<u64, String>,
    other_turns: &BTreeMap<u64, String>,
    titles: &[String],
    topic: Option<&str>,
    last_other: Option<&str>,
    version: reading::ReadingVersion,
) -> TurnReading {
    let (passages, earlier, titles) = texts_read(tagged, own_turns, other_turns, titles);
    reading::read_turn(
        text,
        &reading::ReadingSources {
            passages: &passages,
            earlier: &earlier,
            titles: &titles,
            topic,
            last_other,
            version,
        },
    )
}

/// What is wrong with a recorded pass, if anything: it must be exactly what
/// [`pass`] records (no text, no citations, the grading of an empty reply
/// against the turn's sources, no attempts).
pub fn pass_problem(
    u: &Utterance,
    pool: &[Passage],
    other_turns: &BTreeMap<u64, String>,
    own_turns: &BTreeMap<u64, String>,
) -> Option<&'static str> {
    let (checked, _) = record_reply("", &u.retrieved, pool, other_turns, own_turns);
    if !u.text.is_empty() || !u.raw_text.is_empty() {
        Some("a pass carries text")
    } else if !u.cited.is_empty() || !u.snaps.is_empty() {
        Some("a pass carries citations or snaps")
    } else if u.grounded || u.grounding != checked.grounding {
        Some("a pass claims grounding")
    } else if u.attempts != 0 || u.guided {
        Some("a pass claims model attempts")
    } else if u.figures.is_some() || u.reading.is_some() {
        Some("a pass carries word figures")
    } else {
        None
    }
}

/// Whether a reply has any text at all.
pub fn has_text(reply: &str) -> bool {
    !reply.trim().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::moot::RetrieveError;

    fn passage(i: u64) -> Passage {
        Passage {
            node_id: format!("b/x#{i}"),
            label: format!("chunk:{i:04}"),
            index: i,
            leaf: String::new(),
            content: format!("text {i}"),
        }
    }

    struct Ranked(Vec<Passage>);
    impl Retriever for Ranked {
        fn search(&mut self, _q: &str, k: usize) -> Result<Vec<Passage>, RetrieveError> {
            Ok(self.0.iter().take(k).cloned().collect())
        }
    }

    #[test]
    fn the_topic_is_no_run_of_the_prompt_to_avoid() {
        let topic = "how people should spend their time";
        let persona = prompt::persona(Some(topic), &[]);
        let runs = prompt_runs(&persona, Some(topic));
        assert!(runs.len() >= 2, "{runs:?}");
        let index = crate::guide::words::RunIndex::new(
            &runs.iter().map(String::as_str).collect::<Vec<_>>(),
            &[],
            crate::guide::words::COPY_RUN_WORDS,
        );
        let said = crate::guide::words::words("people should spend their time wisely");
        assert_eq!(index.copied_words(&said), 0);
        // The rest of the prompt is still refused.
        let echoed = crate::guide::words::words("a wise person talking with a friend");
        assert!(index.copied_words(&echoed) > 0);
        assert_eq!(prompt_runs("no topic here", None), ["no topic here"]);
    }

    #[test]
    fn cited_passages_go_to_the_back() {
        let mut r = Ranked((0..9).map(passage).collect());
        let cited: BTreeSet<String> = ["b/x#0", "b/x#2"].iter().map(|s| s.to_string()).collect();
        let got = retrieve(&mut r, "b/x", "q", 3, &cited).expect("retrieves");
        let ids: Vec<u64> = got.iter().map(|p| p.index).collect();
        assert_eq!(ids, [1, 3, 4]);
        // With few uncited hits, cited ones fill the rest in rank order.
        let mut small = Ranked((0..3).map(passage).collect());
        let got = retrieve(&mut small, "b/x", "q", 3, &cited).expect("retrieves");
        let ids: Vec<u64> = got.iter().map(|p| p.index).collect();
        assert_eq!(ids, [1, 0, 2]);
    }

    #[test]
    fn empty_search_is_an_error() {
        let mut r = Ranked(Vec::new());
        assert!(matches!(
            retrieve(&mut r, "b/x", "q", 3, &BTreeSet::new()),
            Err(MootError::NoPassages { .. })
        ));
    }

    fn request_with(topic: &str, incoming: Option<&str>, own: &[&str]) -> TurnRequest {
        TurnRequest {
            turn: 3,
            speaker: Tree::new("a/a", "A", ""),
            other: Tree::new("b/b", "B", ""),
            topic: Some(topic.into()),
            query: String::new(),
            passages: Vec::new(),
            pool: Vec::new(),
            other_turns: BTreeMap::new(),
            own_turns: own
                .iter()
                .enumerate()
                .map(|(i, t)| (i as u64 + 1, t.to_string()))
                .collect(),
            incoming: incoming.map(|text| Line {
                turn: 2,
                title: "B".into(),
                text: text.into(),
            }),
            recent: Vec::new(),
            summary: None,
            mv: Move::Answer,
            temperature: 0.0,
            max_tokens: 100,
            seed: 0,
        }
    }

    fn tagged(texts: &[&str]) -> Vec<TaggedPassage> {
        let passages: Vec<Passage> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| Passage {
                content: t.to_string(),
                ..passage(i as u64)
            })
            .collect();
        tag_passages(&passages)
    }

    /// Evidence first: the clause holding most of the topic's and the
    /// other's last quote's words, not one quoted before, cut to its last
    /// words when long.
    #[test]
    fn the_quote_is_the_clause_that_holds_the_point() {
        let passages = tagged(&[
            "The weather was fine that morning, and nobody spoke of anything at all.",
            "A man of sense keeps his word, for the walls and laws of the city keep him.",
        ]);
        let line = "I say \"the walls of a town are its laws\" [s1].";
        let request = request_with("the law of the city", Some(line), &[]);
        let chosen = choose_quote(&request, &passages).unwrap();
        assert_eq!(chosen.tag, "s2");
        assert_eq!(chosen.text, "for the walls and laws of the city keep him");
        // Quoted by this speaker before: another clause instead (none other
        // holds the point: the first that says most).
        let said = "Yes, \"for the walls and laws of the city keep him\" [s2].";
        let request = request_with("the law of the city", Some(line), &[said]);
        let chosen = choose_quote(&request, &passages).unwrap();
        assert_eq!(chosen.text, "The weather was fine that morning");
        // A clause cut at a title's full stop is no quote.
        let titled = tagged(&["The law was made by Mr. Bennet in the city."]);
        let chosen = choose_quote(&request_with("law", None, &[]), &titled).unwrap();
        assert_eq!(chosen.text, "Bennet in the city");
        // A long clause: its last words.
        let long = tagged(&[
            "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen law",
        ]);
        let chosen = choose_quote(&request_with("law", None, &[]), &long).unwrap();
        assert_eq!(chosen.text.split_whitespace().count(), CHOSEN_QUOTE_WORDS);
        assert!(chosen.text.starts_with("three ") && chosen.text.ends_with(" law"));
    }

    /// The quote a turn speaks from: the first of [`choose_quotes`].
    fn choose_quote(request: &TurnRequest, tagged: &[TaggedPassage]) -> Option<ChosenQuote> {
        choose_quotes(request, tagged, 1).pop()
    }

    #[test]
    fn a_long_clause_is_chosen_by_its_last_words() {
        let last = |text: &str, n| {
            let ranges = crate::content::clauses_of(text, n);
            ranges
                .iter()
                .map(|r| text[r.clone()].to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(last("a b  c d e", 4), ["b  c d e"]);
        assert_eq!(last("a b c d", 5), ["a b c d"]);
        assert_eq!(last("  só é  dito aqui mesmo", 4), ["é  dito aqui mesmo"]);
    }

    #[test]
    fn pool_keeps_each_node_once_in_order() {
        let mut pool = vec![passage(2)];
        extend_pool(&mut pool, &[passage(1), passage(2), passage(1), passage(5)]);
        let ids: Vec<u64> = pool.iter().map(|p| p.index).collect();
        assert_eq!(ids, [2, 1, 5]);
    }
}
