//! best_span benchmark: grove's pruned exact search against a Python difflib
//! implementation of ground-v1 §8 (`benches/best_span.py`), on the same
//! generated case in the same run, checking both agree exactly.
//!
//! The case: a pool of 60 passages of about 200 words; quotes of 8 to 30
//! words, some near-misses (a word replaced, dropped or misspelt), some
//! absent (words of the book in an order it never uses), a few exact.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Instant;

/// This thread's CPU time in seconds (Linux `schedstat`), the clock Python's
/// `time.thread_time()` reads; `None` where it is not available. The kernel
/// updates it about once per scheduler tick, so only long spans are timed
/// with it (see [`cpu_seconds_per_call`]).
fn thread_cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(nanos as f64 / 1e9)
}

/// Least CPU time a measurement spans, so tick granularity stays under 2%.
const MIN_MEASURED_SECONDS: f64 = 0.25;

/// CPU seconds per call of `f` (wall time where CPU time is unavailable):
/// at least `min_calls` calls, and more until the span is long enough.
fn cpu_seconds_per_call<T>(min_calls: usize, mut f: impl FnMut() -> T) -> (T, f64) {
    let cpu_start = thread_cpu_seconds();
    let wall_start = Instant::now();
    let mut calls = 0usize;
    loop {
        let value = f();
        calls += 1;
        let elapsed = match (cpu_start, thread_cpu_seconds()) {
            (Some(a), Some(b)) => b - a,
            _ => wall_start.elapsed().as_secs_f64(),
        };
        if calls >= min_calls && (elapsed >= MIN_MEASURED_SECONDS || calls >= 10_000) {
            return (value, elapsed / calls as f64);
        }
    }
}

use anyhow::{Context, bail};
use grove::grounding::best_span;

const VOCABULARY: &str = "the of and to a in that it was he his i with as for had you not be her \
    is on at by which have or from this him but all she they were my are me one their so an said \
    them we who would been will no when there if more out up into do any your what has man could \
    other than our some very time upon about may its only now like little then can should made did \
    us such great before must two these see know over much down after first mr good men own never \
    most old shall day where those came come himself way work life without go make well through \
    being long say might how am too even again many back here think every people went yet just \
    under whale sea ship captain water fish river angler trout hook line rod bank morning evening \
    house lady gentleman sister daughter mother father fortune marriage ball letter walk garden \
    heart mind hand eye face head voice word truth nothing something thought felt knew told found \
    seemed looked turned heard left right whole half deep dark bright cold warm strange certain \
    sure quite rather perhaps indeed therefore however whether though although while since until \
    don't can't won't it's whale's ship's";

/// splitmix64: a small deterministic generator, so every run benches the same case.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
}

struct Case {
    passages: Vec<String>,
    /// (kind, quote)
    quotes: Vec<(&'static str, String)>,
}

fn passage(rng: &mut Rng, vocab: &[&str]) -> (String, Vec<String>) {
    let mut text = String::new();
    let mut words = Vec::new();
    let mut sentence_start = true;
    let count = rng.range(185, 215);
    for i in 0..count {
        let mut word = vocab[rng.below(vocab.len())].to_string();
        words.push(word.clone());
        if sentence_start {
            let mut chars = word.chars();
            if let Some(first) = chars.next() {
                word = first.to_uppercase().chain(chars).collect();
            }
        }
        if i > 0 {
            text.push(' ');
        }
        text.push_str(&word);
        sentence_start = false;
        match rng.below(20) {
            0 | 1 => {
                text.push('.');
                sentence_start = true;
            }
            2 | 3 => text.push(','),
            4 => text.push(';'),
            _ => {}
        }
        if rng.below(60) == 0 {
            text.push_str("\n\n");
        }
    }
    text.push('.');
    (text, words)
}

/// 60 passages of about 200 words from the middle of a real book: its
/// blank-line paragraphs packed greedily (not the store's chunker; only the
/// text's statistics matter here).
fn corpus_passages(text: &str) -> Vec<(String, Vec<String>)> {
    let paragraphs: Vec<String> = text
        .replace("\r\n", "\n")
        .split("\n\n")
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|p| !p.is_empty())
        .collect();
    let mut passages = Vec::new();
    let mut current: Vec<String> = Vec::new();
    let mut words = 0;
    for p in paragraphs {
        let n = p.split_whitespace().count();
        if words > 0 && words + n > 200 {
            passages.push(current.join("\n\n"));
            current.clear();
            words = 0;
        }
        current.push(p);
        words += n;
    }
    let start = passages.len().saturating_sub(60) / 2;
    passages
        .into_iter()
        .skip(start)
        .take(60)
        .map(|p| {
            let w = p.split_whitespace().map(str::to_string).collect();
            (p, w)
        })
        .collect()
}

fn generate(quote_count: usize, corpus: Option<&str>) -> Case {
    let vocab: Vec<&str> = VOCABULARY.split_whitespace().collect();
    let mut rng = Rng(0x67_726F_7665);
    let mut passages = Vec::new();
    let mut word_lists = Vec::new();
    match corpus {
        Some(text) => {
            for (p, w) in corpus_passages(text) {
                passages.push(p);
                word_lists.push(w);
            }
        }
        None => {
            for _ in 0..60 {
                let (text, words) = passage(&mut rng, &vocab);
                passages.push(text);
                word_lists.push(words);
            }
        }
    }
    let mut quotes = Vec::new();
    for q in 0..quote_count {
        let len = rng.range(8, 30);
        let kind = match q % 6 {
            0..=2 => "near-miss",
            3 | 4 => "absent",
            _ => "exact",
        };
        let quote_words: Vec<String> = if kind == "absent" {
            (0..len)
                .map(|_| vocab[rng.below(vocab.len())].to_string())
                .collect()
        } else {
            let words = loop {
                let w = &word_lists[rng.below(word_lists.len())];
                if w.len() > len {
                    break w;
                }
            };
            let start = rng.below(words.len() - len);
            let mut slice: Vec<String> = words[start..start + len].to_vec();
            if kind == "near-miss" {
                // One to three edits: replace a word, drop one, or misspell one.
                for _ in 0..rng.range(1, 3) {
                    let at = rng.below(slice.len());
                    match rng.below(3) {
                        0 => slice[at] = vocab[rng.below(vocab.len())].to_string(),
                        1 if slice.len() > 8 => {
                            slice.remove(at);
                        }
                        _ => {
                            let mut w: Vec<char> = slice[at].chars().collect();
                            let pos = rng.below(w.len());
                            w[pos] = char::from(b'a' + rng.below(26) as u8);
                            slice[at] = w.into_iter().collect();
                        }
                    }
                }
            }
            slice
        };
        quotes.push((kind, quote_words.join(" ")));
    }
    Case { passages, quotes }
}

struct PythonResult {
    span: String,
    ratio: f64,
    seconds: f64,
}

fn run_python(case: &Case) -> anyhow::Result<Vec<PythonResult>> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/best_span.py");
    let input = serde_json::json!({
        "texts": case.passages,
        "quotes": case.quotes.iter().map(|(_, q)| q).collect::<Vec<_>>(),
    });
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("starting python3 (use --no-python to skip the comparison)")?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.to_string().as_bytes())?;
    }
    let output = child.wait_with_output()?;
    if !output.status.success() {
        bail!("{script} failed: {}", output.status);
    }
    let value: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let results = value["results"]
        .as_array()
        .context("python output lacks results")?
        .iter()
        .map(|r| PythonResult {
            span: r["span"].as_str().unwrap_or_default().to_string(),
            ratio: r["ratio"].as_f64().unwrap_or(f64::NAN),
            seconds: r["seconds"].as_f64().unwrap_or(f64::NAN),
        })
        .collect();
    Ok(results)
}

/// What `grove-bench grounding` was asked for.
struct Options {
    quote_count: usize,
    reps: usize,
    python: bool,
    corpus: Option<String>,
}

impl Options {
    fn parse(args: &[String]) -> anyhow::Result<Options> {
        let mut o = Options {
            quote_count: 12,
            reps: 5,
            python: true,
            corpus: None,
        };
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            match arg.as_str() {
                "--quotes" => o.quote_count = it.next().context("--quotes N")?.parse()?,
                "--reps" => o.reps = it.next().context("--reps R")?.parse()?,
                "--no-python" => o.python = false,
                "--corpus" => {
                    let path = it.next().context("--corpus FILE")?;
                    o.corpus = Some(
                        std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?,
                    );
                }
                other => bail!("unknown argument {other}"),
            }
        }
        o.reps = o.reps.max(1);
        Ok(o)
    }
}

/// `grove-bench grounding [--quotes N] [--reps R] [--no-python] [--corpus FILE]`
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let options = Options::parse(args)?;
    let reps = options.reps;
    let case = generate(options.quote_count, options.corpus.as_deref());
    if case.passages.is_empty() {
        bail!("no passages (is the corpus file empty?)");
    }
    let words: usize = case
        .passages
        .iter()
        .map(|p| p.split_whitespace().count())
        .sum();
    println!(
        "times are per-thread CPU time{} (rust: mean over >= {MIN_MEASURED_SECONDS} s of calls; python: one call)",
        if thread_cpu_seconds().is_some() {
            ""
        } else {
            " (unavailable here: wall time)"
        }
    );
    println!(
        "best_span: pool of {} passages ({} words, {:.0} per passage), {} quotes, {} reps",
        case.passages.len(),
        words,
        words as f64 / case.passages.len() as f64,
        case.quotes.len(),
        reps
    );

    let mut rust = Vec::new();
    for (_, quote) in &case.quotes {
        rust.push(cpu_seconds_per_call(reps, || {
            best_span(quote, &case.passages)
        }));
    }

    let python_results = if options.python {
        Some(run_python(&case)?)
    } else {
        None
    };
    let mismatches = print_comparison(&case, &rust, python_results.as_deref());
    let rust_total: f64 = rust.iter().map(|(_, s)| s).sum();
    if let Some(py) = &python_results {
        let py_total: f64 = py.iter().map(|p| p.seconds).sum();
        println!(
            "all quotes: rust {:.1} ms ({:.2} ms/quote), python {:.2} s ({:.2} s/quote), speed ratio {:.0}x, {} mismatches",
            rust_total * 1e3,
            rust_total * 1e3 / rust.len() as f64,
            py_total,
            py_total / py.len() as f64,
            py_total / rust_total,
            mismatches
        );
        if mismatches > 0 {
            bail!("{mismatches} quotes differ between rust and python");
        }
    } else {
        println!(
            "all quotes: rust {:.1} ms ({:.2} ms/quote)",
            rust_total * 1e3,
            rust_total * 1e3 / rust.len() as f64
        );
    }
    Ok(())
}

/// The table of quotes, rust's result and time against python's, then the
/// totals per kind of quote; returns how many quotes the two disagree on.
fn print_comparison(
    case: &Case,
    rust: &[(grove::grounding::BestSpan, f64)],
    python_results: Option<&[PythonResult]>,
) -> usize {
    println!(
        "{:<10} {:>5} {:>7} {:>11} {:>11} {:>8}  agree",
        "kind", "words", "ratio", "rust ms", "python s", "speedup"
    );
    let mut mismatches = 0;
    let mut totals: Vec<(&str, f64, f64)> = Vec::new();
    for (i, ((kind, quote), (result, seconds))) in case.quotes.iter().zip(rust).enumerate() {
        let py = python_results.and_then(|p| p.get(i));
        let (py_s, agree) = match py {
            Some(p) => {
                let agree = p.span == result.span && p.ratio.to_bits() == result.ratio.to_bits();
                if !agree {
                    mismatches += 1;
                    println!(
                        "MISMATCH on {quote:?}: rust ({:?}, {}) python ({:?}, {})",
                        result.span, result.ratio, p.span, p.ratio
                    );
                }
                (p.seconds, if agree { "yes" } else { "NO" })
            }
            None => (f64::NAN, "-"),
        };
        println!(
            "{:<10} {:>5} {:>7.4} {:>11.3} {:>11.3} {:>7.0}x  {}",
            kind,
            quote.split_whitespace().count(),
            result.ratio,
            seconds * 1e3,
            py_s,
            py_s / seconds,
            agree
        );
        match totals.iter_mut().find(|(k, _, _)| k == kind) {
            Some(t) => {
                t.1 += seconds;
                t.2 += py_s;
            }
            None => totals.push((kind, *seconds, py_s)),
        }
    }
    for (kind, r, p) in &totals {
        println!(
            "{kind:<10} total: rust {:.1} ms, python {:.2} s, speed ratio {:.0}x",
            r * 1e3,
            p,
            p / r
        );
    }
    mismatches
}
