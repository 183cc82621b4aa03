//! BM25 over a collection of books, computed as FTS5's `bm25()` computes it
//! over one index holding every searched chunk: statistics in, scores out.
//!
//! A search over several books (one node's, or a whole mesh's) runs in two
//! rounds. First every holder reports [`QueryStats`] for the query over its
//! books; the stats sum ([`QueryStats::merge`]). Then the summed stats fix
//! the query's plan (every word, or the rarest words when every word finds
//! fewer than `k` chunks) and each word's weight ([`Ranking`]), and every
//! holder scores its own chunks with them, so all scores are comparable.
//!
//! Query text is user input, so it is never handed to FTS5 as syntax: it is
//! cut into words and each word is quoted, so quotes, parentheses, `NEAR`,
//! `*`, `^` and column filters are plain words.

use serde::{Deserialize, Serialize};

/// FTS5's `bm25()` constants.
const K1: f64 = 1.2;
const B: f64 = 0.75;
/// How many of the query's words the fallback keeps (the rarest).
const FALLBACK_TERMS: usize = 3;
/// How many of the longest words are counted to find the rarest.
const COUNTED_TERMS: usize = 8;

/// The words of a query: maximal runs of letters and digits, lowercased,
/// first occurrence kept.
pub fn terms(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let word = word.to_lowercase();
        if !out.contains(&word) {
            out.push(word);
        }
    }
    out
}

/// One word as an FTS5 string literal (a word never holds `"`, but doubling
/// keeps the literal closed whatever it holds).
pub fn quote(term: &str) -> String {
    format!("\"{}\"", term.replace('"', "\"\""))
}

/// The FTS5 query holding every word.
pub fn all_words_query(words: &[String]) -> String {
    words
        .iter()
        .map(|w| quote(w))
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// The fallback's FTS5 query: any of the rare words, or every word (so
/// chunks holding every word still rank with all their words).
pub fn fallback_query(rare: &[String], words: &[String]) -> String {
    let mut any = rare
        .iter()
        .map(|w| quote(w))
        .collect::<Vec<_>>()
        .join(" OR ");
    any.push_str(&format!(" OR ({})", all_words_query(words)));
    any
}

/// The words whose rarity is counted: the longest few (ties in query order).
pub fn counted_words(words: &[String]) -> Vec<&String> {
    let mut longest: Vec<&String> = words.iter().collect();
    longest.sort_by_key(|w| std::cmp::Reverse(w.chars().count()));
    longest.truncate(COUNTED_TERMS);
    longest
}

/// The fallback's words: of the counted `(chunks holding it, word)` pairs,
/// the few held by the fewest chunks, never by none.
pub fn rarest(mut counted: Vec<(u64, String)>) -> Vec<String> {
    counted.retain(|(n, _)| *n > 0);
    counted.sort();
    counted
        .into_iter()
        .take(FALLBACK_TERMS)
        .map(|(_, w)| w)
        .collect()
}

/// What one holder (or, summed, a whole collection) knows about a query:
/// what BM25 needs and what the fallback decision needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryStats {
    /// The query's words ([`terms`]), in order; the other fields follow them.
    pub words: Vec<String>,
    /// Chunks searched (FTS5's row count).
    pub chunks: u64,
    /// Tokens in those chunks (FTS5's total size).
    pub tokens: u64,
    /// For each word: how many chunks hold it.
    pub word_chunks: Vec<u64>,
    /// Chunks holding every word, counted up to the `k` asked for (the
    /// fallback only asks whether there are `k`).
    pub all_words: u64,
}

/// Stats for different queries cannot be summed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("search statistics are for the words {found:?}, not {expected:?}")]
pub struct StatsMismatch {
    pub expected: Vec<String>,
    pub found: Vec<String>,
}

impl QueryStats {
    /// Stats of no chunks, for `words`: the start of a sum.
    pub fn empty(words: Vec<String>) -> QueryStats {
        let word_chunks = vec![0; words.len()];
        QueryStats {
            words,
            chunks: 0,
            tokens: 0,
            word_chunks,
            all_words: 0,
        }
    }

    /// Adds another holder's stats for the same words.
    pub fn merge(&mut self, other: &QueryStats) -> Result<(), StatsMismatch> {
        self.check_words(&other.words)?;
        if other.word_chunks.len() != self.words.len() {
            return Err(StatsMismatch {
                expected: self.words.clone(),
                found: other.words.clone(),
            });
        }
        self.chunks = self.chunks.saturating_add(other.chunks);
        self.tokens = self.tokens.saturating_add(other.tokens);
        for (mine, theirs) in self.word_chunks.iter_mut().zip(&other.word_chunks) {
            *mine = mine.saturating_add(*theirs);
        }
        self.all_words = self.all_words.saturating_add(other.all_words);
        Ok(())
    }

    /// Errs unless these stats are for exactly `words`.
    pub fn check_words(&self, words: &[String]) -> Result<(), StatsMismatch> {
        if self.words == words && self.word_chunks.len() == words.len() {
            Ok(())
        } else {
            Err(StatsMismatch {
                expected: words.to_vec(),
                found: self.words.clone(),
            })
        }
    }

    fn chunks_of(&self, word: &str) -> u64 {
        self.words
            .iter()
            .position(|w| w == word)
            .and_then(|i| self.word_chunks.get(i).copied())
            .unwrap_or(0)
    }

    /// The plan for the top `k`, decided once for the whole collection:
    /// every word, unless that finds fewer than `k` chunks; then the
    /// rarest few words (rarity over the collection), ranked together with
    /// the all-words match.
    pub fn plan(&self, k: usize) -> Plan {
        if self.all_words >= k as u64 || self.words.len() <= 1 {
            return Plan::AllWords;
        }
        let counted = counted_words(&self.words)
            .into_iter()
            .map(|w| (self.chunks_of(w), w.clone()))
            .collect();
        match rarest(counted) {
            rare if rare.is_empty() => Plan::AllWords,
            rare => Plan::AnyRare(rare),
        }
    }

    /// The query and weights every holder scores with for the top `k`.
    pub fn ranking(&self, k: usize) -> Ranking {
        let plan = self.plan(k);
        let (query, phrases): (String, Vec<&String>) = match &plan {
            Plan::AllWords => (all_words_query(&self.words), self.words.iter().collect()),
            Plan::AnyRare(rare) => (
                fallback_query(rare, &self.words),
                rare.iter().chain(&self.words).collect(),
            ),
        };
        let idf = phrases
            .iter()
            .map(|w| idf(self.chunks, self.chunks_of(w)))
            .collect();
        Ranking {
            plan,
            fts_query: query,
            idf,
            avgdl: self.tokens as f64 / self.chunks as f64,
        }
    }
}

/// Which words a search matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Plan {
    /// Chunks holding every word.
    AllWords,
    /// Chunks holding any of these rare words, or every word.
    AnyRare(Vec<String>),
}

/// A query ready to score: the FTS5 query every holder matches with and,
/// for each of its phrases in order, the collection's weight.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranking {
    pub plan: Plan,
    pub fts_query: String,
    /// One per phrase of `fts_query`, in the order FTS5 numbers them.
    pub idf: Vec<f64>,
    /// The collection's average chunk length in tokens.
    pub avgdl: f64,
}

impl Ranking {
    /// A chunk's score (higher is better) from each phrase's count in it
    /// and its length in tokens.
    pub fn score(&self, freq: &[f64], tokens: f64) -> f64 {
        bm25(&self.idf, self.avgdl, freq, tokens)
    }
}

/// One book a scorer may meet: its chunks are rows `first ..`, one per
/// u32 little-endian entry of `lengths` (each chunk's length in tokens, as
/// FTS5 counts it), and its key is the `key_rank`-th of the searched books
/// in key order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BookRows {
    pub first: i64,
    pub key_rank: u64,
    pub lengths: Vec<u8>,
}

/// Which of two tied rows comes first: the book earlier in key order, then
/// the lower chunk index.
pub type Tie = (u64, u64);

/// Where one book's rows sit in a [`Scorer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    first: i64,
    key_rank: u64,
    count: u64,
    /// Byte offset of the book's first length.
    at: usize,
}

/// A [`Ranking`] at work in one index: the weights, and the searched books'
/// rows, so every row has its length and its place among ties.
#[derive(Debug, Clone, PartialEq)]
pub struct Scorer {
    idf: Vec<f64>,
    avgdl: f64,
    /// Sorted by `first`.
    spans: Vec<Span>,
    lengths: Vec<u8>,
}

impl Scorer {
    pub fn new(ranking: &Ranking, mut books: Vec<BookRows>) -> Scorer {
        books.sort_by_key(|b| b.first);
        let mut scorer = Scorer {
            idf: ranking.idf.clone(),
            avgdl: ranking.avgdl,
            spans: Vec::with_capacity(books.len()),
            lengths: Vec::with_capacity(books.iter().map(|b| b.lengths.len()).sum()),
        };
        for b in books {
            scorer.spans.push(Span {
                first: b.first,
                key_rank: b.key_rank,
                count: (b.lengths.len() / 4) as u64,
                at: scorer.lengths.len(),
            });
            scorer
                .lengths
                .extend_from_slice(&b.lengths[..b.lengths.len() / 4 * 4]);
        }
        scorer
    }

    /// The scorer as three little-endian blobs for the SQL function:
    /// weights (the average length, then each IDF, f64), books (for each:
    /// first row i64, key rank u64, chunk count u64) and their chunks'
    /// lengths (u32 each, book after book).
    pub fn encode(&self) -> (Vec<u8>, Vec<u8>, &[u8]) {
        let weights = std::iter::once(self.avgdl)
            .chain(self.idf.iter().copied())
            .flat_map(f64::to_le_bytes)
            .collect();
        let books = self
            .spans
            .iter()
            .flat_map(|b| {
                [
                    b.first.to_le_bytes(),
                    b.key_rank.to_le_bytes(),
                    b.count.to_le_bytes(),
                ]
            })
            .flatten()
            .collect();
        (weights, books, &self.lengths)
    }

    /// [`Scorer::encode`]'s blobs back, for a query of `phrases` phrases;
    /// `None` when they do not fit.
    pub fn decode(weights: &[u8], books: &[u8], lengths: &[u8], phrases: usize) -> Option<Scorer> {
        let word = |b: &[u8]| -> Option<[u8; 8]> { b.try_into().ok() };
        if weights.len() != 8 * (phrases + 1) || !books.len().is_multiple_of(24) {
            return None;
        }
        let floats: Vec<f64> = weights
            .chunks_exact(8)
            .map(|b| word(b).map(f64::from_le_bytes))
            .collect::<Option<_>>()?;
        let mut spans = Vec::with_capacity(books.len() / 24);
        let mut at = 0usize;
        for b in books.chunks_exact(24) {
            let count = u64::from_le_bytes(word(&b[16..])?);
            spans.push(Span {
                first: i64::from_le_bytes(word(&b[..8])?),
                key_rank: u64::from_le_bytes(word(&b[8..16])?),
                count,
                at,
            });
            at = at.checked_add(usize::try_from(count).ok()?.checked_mul(4)?)?;
        }
        if at != lengths.len() {
            return None;
        }
        let (avgdl, idf) = floats.split_first()?;
        Some(Scorer {
            idf: idf.to_vec(),
            avgdl: *avgdl,
            spans,
            lengths: lengths.to_vec(),
        })
    }

    /// A row's place among ties and its length in tokens, or `None` for a
    /// row of no searched book.
    pub fn locate(&self, row: i64) -> Option<(Tie, f64)> {
        let at = self
            .spans
            .partition_point(|b| b.first <= row)
            .checked_sub(1)?;
        let book = self.spans[at];
        let index = u64::try_from(row - book.first).ok()?;
        if index >= book.count {
            return None;
        }
        let from = book.at + 4 * index as usize;
        let tokens = u32::from_le_bytes(self.lengths.get(from..from + 4)?.try_into().ok()?);
        Some(((book.key_rank, index), f64::from(tokens)))
    }

    /// A row's score from each phrase's count in it and its length.
    pub fn score(&self, freq: &[f64], tokens: f64) -> f64 {
        bm25(&self.idf, self.avgdl, freq, tokens)
    }
}

/// A row kept by [`TopK`]; the worst row is the greatest, so it sits on top
/// of the heap.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Kept {
    score: f64,
    tie: Tie,
}

impl Eq for Kept {}

impl Ord for Kept {
    fn cmp(&self, other: &Kept) -> std::cmp::Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then(self.tie.cmp(&other.tie))
    }
}

impl PartialOrd for Kept {
    fn partial_cmp(&self, other: &Kept) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// The best `k` rows seen so far, best score first and ties by [`Tie`].
#[derive(Debug, Clone)]
pub struct TopK {
    k: usize,
    kept: std::collections::BinaryHeap<Kept>,
}

impl TopK {
    pub fn new(k: usize) -> TopK {
        TopK {
            k,
            kept: std::collections::BinaryHeap::new(),
        }
    }

    /// Offers a row; true when it is among the best `k` so far.
    pub fn offer(&mut self, score: f64, tie: Tie) -> bool {
        let row = Kept { score, tie };
        if self.kept.len() < self.k {
            self.kept.push(row);
            return true;
        }
        match self.kept.peek() {
            Some(worst) if row < *worst => {
                self.kept.pop();
                self.kept.push(row);
                true
            }
            _ => false,
        }
    }
}

/// The order of hits `(score, book key, chunk index)` from any number of
/// holders: best score first, then key and index, so ties break the same
/// way everywhere.
pub fn order(a: (f64, &str, u64), b: (f64, &str, u64)) -> std::cmp::Ordering {
    b.0.total_cmp(&a.0)
        .then_with(|| a.1.cmp(b.1))
        .then(a.2.cmp(&b.2))
}

/// FTS5's IDF: `ln((N - n + 0.5) / (n + 0.5))`, floored at 1e-6 so a word
/// in more than half the chunks still counts a little.
pub fn idf(chunks: u64, hits: u64) -> f64 {
    let idf = ((chunks as i64 - hits as i64) as f64 + 0.5) / (hits as f64 + 0.5);
    let idf = idf.ln();
    if idf <= 0.0 { 1e-6 } else { idf }
}

/// FTS5's `bm25()` for one row, negated (higher is better), with the same
/// operations in the same order so the result is bit-identical.
pub fn bm25(idf: &[f64], avgdl: f64, freq: &[f64], tokens: f64) -> f64 {
    let mut score = 0.0;
    for (idf, f) in idf.iter().zip(freq) {
        score += idf * ((f * (K1 + 1.0)) / (f + K1 * (1.0 - B + B * tokens / avgdl)));
    }
    score
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(ws: &[&str]) -> Vec<String> {
        ws.iter().map(|w| w.to_string()).collect()
    }

    fn stats(ws: &[&str], chunks: u64, word_chunks: &[u64], all_words: u64) -> QueryStats {
        QueryStats {
            words: words(ws),
            chunks,
            tokens: chunks * 100,
            word_chunks: word_chunks.to_vec(),
            all_words,
        }
    }

    #[test]
    fn stats_sum_and_refuse_other_words() {
        let mut total = QueryStats::empty(words(&["white", "whale"]));
        total
            .merge(&stats(&["white", "whale"], 10, &[3, 1], 1))
            .unwrap();
        total
            .merge(&stats(&["white", "whale"], 5, &[0, 4], 0))
            .unwrap();
        assert_eq!(total, stats(&["white", "whale"], 15, &[3, 5], 1));
        let err = total.merge(&stats(&["whale", "white"], 1, &[1, 1], 1));
        assert!(err.is_err());
        assert_eq!(total.chunks, 15, "a refused merge changes nothing");
    }

    #[test]
    fn the_fallback_is_decided_on_the_collection() {
        let s = stats(&["the", "white", "whale"], 100, &[90, 20, 5], 2);
        assert_eq!(s.plan(2), Plan::AllWords);
        assert_eq!(
            s.plan(3),
            Plan::AnyRare(words(&["whale", "white", "the"])),
            "rarest first, every counted word held by some chunk"
        );
        let r = s.ranking(3);
        assert_eq!(
            r.fts_query,
            "\"whale\" OR \"white\" OR \"the\" OR (\"the\" AND \"white\" AND \"whale\")"
        );
        assert_eq!(r.idf.len(), 6);
        assert_eq!(r.idf[0], idf(100, 5));
        assert_eq!(r.idf[5], idf(100, 5));
        let one = stats(&["whale"], 100, &[5], 0);
        assert_eq!(one.plan(3), Plan::AllWords, "one word has no fallback");
        let none = stats(&["zz", "yy"], 100, &[0, 0], 0);
        assert_eq!(none.plan(3), Plan::AllWords);
    }

    #[test]
    fn idf_follows_fts5_and_floors_common_words() {
        assert!((idf(1000, 10) - (990.5f64 / 10.5).ln()).abs() < 1e-15);
        assert_eq!(idf(1000, 500), 1e-6);
        assert_eq!(idf(1000, 1000), 1e-6);
    }

    #[test]
    fn top_k_keeps_the_best_and_breaks_ties_by_book_then_index() {
        let mut top = TopK::new(2);
        assert!(top.offer(1.0, (0, 5)));
        assert!(top.offer(3.0, (1, 0)));
        assert!(!top.offer(0.5, (0, 0)), "worse than both kept");
        assert!(top.offer(1.0, (0, 4)), "a tie with a lower index enters");
        assert!(!top.offer(1.0, (0, 5)), "pushed out by its tie");
        assert!(!top.offer(1.0, (0, 6)));
        assert!(!TopK::new(0).offer(f64::MAX, (0, 0)));
    }

    #[test]
    fn scorers_round_trip_and_place_rows_in_their_books() {
        let ranking = stats(&["a", "b"], 10, &[2, 3], 1).ranking(1);
        let lengths = |l: &[u32]| l.iter().flat_map(|n| n.to_le_bytes()).collect();
        let books = vec![
            BookRows {
                first: 11,
                key_rank: 0,
                lengths: lengths(&[5, 6, 7, 8]),
            },
            BookRows {
                first: 1,
                key_rank: 1,
                lengths: lengths(&[9; 10]),
            },
        ];
        let scorer = Scorer::new(&ranking, books);
        let (w, b, l) = scorer.encode();
        let back = Scorer::decode(&w, &b, l, 2).unwrap();
        assert_eq!(back, scorer);
        assert!(Scorer::decode(&w, &b, l, 3).is_none());
        assert!(Scorer::decode(&w, &b, &l[..l.len() - 4], 2).is_none());
        assert_eq!(scorer.locate(1), Some(((1, 0), 9.0)));
        assert_eq!(scorer.locate(14), Some(((0, 3), 8.0)));
        assert_eq!(scorer.locate(15), None);
        assert_eq!(scorer.locate(0), None);
    }

    #[test]
    fn bm25_rewards_frequency_and_short_chunks() {
        let idf = [2.0, 0.5];
        let base = bm25(&idf, 100.0, &[1.0, 1.0], 100.0);
        assert!(bm25(&idf, 100.0, &[2.0, 1.0], 100.0) > base);
        assert!(bm25(&idf, 100.0, &[1.0, 1.0], 50.0) > base);
        // At the average length one hit scores its idf exactly.
        assert!((bm25(&[2.0], 100.0, &[1.0], 100.0) - 2.0).abs() < 1e-12);
    }
}
