//! `grove-bench model [--model FILE] [--runs N] [--gen N] [--prompt-words N]
//! [--no-requantize] [--candle-llama] [--int8-prefill] [--dump-prompt FILE]`:
//! the embedded model's load time, prompt and generation speed, peak RSS,
//! and the cost of guided decoding per token (the guide's own time, measured
//! around each `constrain` and `accept` call of a guided generation, with
//! every rule on: verbatim clause-aligned quotes from six passages, and the
//! copy rule over the whole prompt), as a share of generation time.
//!
//! Generation runs greedy with the stop tokens masked, so every run decodes
//! exactly `--gen` tokens. `--dump-prompt FILE` writes the prompt for
//! `model_llama_cpp.py`, which times llama.cpp on the same file and tokens. The prompt is a moot-sized chat built from a book
//! of the shared corpus when present (else the test excerpt of it in
//! `tests/data/corpus`), else from fixed text.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use grove::model::embedded::{EmbeddedModel, EmbeddedOptions};
use grove::model::guide::{Guidance, GuideRules, QuoteGuide};
use grove::model::sampling::{DecodeGuide, GuideControl, Sampler};
use grove::model::{ChatMessage, Role};

/// Forbids the stop tokens so a run always decodes the full count.
struct NoStop(Vec<u32>);

impl DecodeGuide for NoStop {
    fn constrain(&mut self, logits: &mut [f32]) {
        for &id in &self.0 {
            if let Some(logit) = logits.get_mut(id as usize) {
                *logit = f32::NEG_INFINITY;
            }
        }
    }
    fn accept(&mut self, _token: u32) -> GuideControl {
        GuideControl::Continue
    }
}

/// Times another guide's calls.
struct Timed<G> {
    inner: G,
    spent: Duration,
}

impl<G: DecodeGuide> DecodeGuide for Timed<G> {
    fn constrain(&mut self, logits: &mut [f32]) {
        let started = Instant::now();
        self.inner.constrain(logits);
        self.spent += started.elapsed();
    }
    fn accept(&mut self, token: u32) -> GuideControl {
        let started = Instant::now();
        let control = self.inner.accept(token);
        self.spent += started.elapsed();
        control
    }
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut model_path: Option<PathBuf> = None;
    let mut runs = 3usize;
    let mut gen_tokens = 64usize;
    let mut prompt_words = 120usize;
    let mut requantize = true;
    let mut candle_llama = false;
    let mut dense_prefill = true;
    let mut dump_prompt: Option<PathBuf> = None;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let mut value = || iter.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--model" => model_path = Some(PathBuf::from(value()?)),
            "--runs" => runs = value()?.parse().context("--runs")?,
            "--gen" => gen_tokens = value()?.parse().context("--gen")?,
            "--prompt-words" => prompt_words = value()?.parse().context("--prompt-words")?,
            "--no-requantize" => requantize = false,
            "--candle-llama" => candle_llama = true,
            "--int8-prefill" => dense_prefill = false,
            "--dump-prompt" => dump_prompt = Some(PathBuf::from(value()?)),
            other => bail!(
                "unknown argument {other}; usage: grove-bench model [--model FILE] [--runs N] [--gen N] [--prompt-words N] [--no-requantize] [--candle-llama] [--int8-prefill] [--dump-prompt FILE]"
            ),
        }
    }
    let path = match model_path {
        Some(path) => path,
        None => {
            let state = std::env::var_os("GROVE_STATE_DIR")
                .map(PathBuf::from)
                .or_else(|| dirs::data_local_dir().map(|d| d.join("grove")))
                .context("no --model and no state directory")?;
            grove::model::install::default_model_file(&grove::model::install::model_dir(&state))
        }
    };
    let quantization = grove::model::embedded::file_quantization(&path)?;
    let threads = std::env::var("CANDLE_NUM_THREADS")
        .or_else(|_| std::env::var("RAYON_NUM_THREADS"))
        .unwrap_or_else(|_| "default".into());
    println!(
        "model: {} ({quantization}, requantize Q4_1 at load: {requantize}, threads: {threads}, forward: {})",
        path.display(),
        match (candle_llama, dense_prefill) {
            (true, _) => "candle-transformers",
            (false, true) => "grove, float prefill",
            (false, false) => "grove, int8 prefill",
        }
    );

    let started = Instant::now();
    let mut model = EmbeddedModel::load(
        &path,
        EmbeddedOptions {
            requantize_q4_1: requantize,
            top_p: None,
            candle_llama,
            dense_prefill,
            guided: true,
            no_repeat_ngram: 0,
        },
    )?;
    let load = started.elapsed();
    println!("describe: {}", grove::model::ChatModel::describe(&model));
    println!("load: {:.3} s", load.as_secs_f64());

    let passage = prompt_text(prompt_words);
    let messages = vec![
        ChatMessage {
            role: Role::System,
            content: "You are the book Moby Dick by Herman Melville, in a moot with Pride and Prejudice. Speak only from the passages, cite each claim with its tag.".into(),
        },
        ChatMessage {
            role: Role::User,
            content: format!(
                "[s1] (chapter 1)\n{passage}\n\nTurn 2, Pride and Prejudice has just said: It is a truth universally acknowledged. Answer it. Quote the passage.",
            ),
        },
    ];
    let prompt = model.encode_chat(&messages)?;
    if let Some(file) = &dump_prompt {
        // For model_llama_cpp.py: the same prompt, as ids and as text.
        let text = model
            .tokenizer()
            .decode(&prompt, false)
            .map_err(anyhow::Error::msg)?;
        let dump = serde_json::json!({"ids": prompt, "text": text, "stop": model.stop_tokens()});
        std::fs::write(file, dump.to_string()).with_context(|| format!("{}", file.display()))?;
    }
    let mut guide = NoStop(model.stop_tokens().to_vec());
    let mut prompt_rates = Vec::new();
    let mut gen_rates = Vec::new();
    let mut sample_text = String::new();
    for _ in 0..runs.max(1) {
        let mut sampler = Sampler::new(0, 0.0, None);
        let generation = model.generate(&prompt, gen_tokens, &mut sampler, &mut guide)?;
        prompt_rates.push(rate(generation.prompt_tokens, generation.prompt_time));
        gen_rates.push(rate(generation.tokens.len(), generation.generate_time));
        sample_text = generation.text;
    }
    println!(
        "prompt: {} tokens, {:.1} tok/s (median of {})",
        prompt.len(),
        median(&mut prompt_rates),
        prompt_rates.len()
    );
    println!(
        "generation: {gen_tokens} tokens, {:.1} tok/s (median of {})",
        median(&mut gen_rates),
        gen_rates.len()
    );
    guided_overhead(&mut model, &prompt, &messages, &passage, gen_tokens, runs)?;
    println!(
        "peak RSS: {}",
        peak_rss().unwrap_or_else(|| "unknown".into())
    );
    println!(
        "sample: {}",
        sample_text
            .chars()
            .take(160)
            .collect::<String>()
            .replace('\n', " ")
    );
    Ok(())
}

/// Guided generations of the same prompt: the guide's time per token, and
/// its share of a token's time (greedy, so runs repeat the same tokens).
/// The guide has every rule on, the copy rule over the whole prompt as a
/// moot turn has it.
fn guided_overhead(
    model: &mut EmbeddedModel,
    prompt: &[u32],
    messages: &[ChatMessage],
    passage: &str,
    gen_tokens: usize,
    runs: usize,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let vocabulary = model.vocabulary();
    println!(
        "guidance: vocabulary of {} tokens ({} holding two words) built in {:.0} ms (once per load)",
        vocabulary.len(),
        vocabulary.two_word_tokens(),
        started.elapsed().as_secs_f64() * 1e3
    );
    // Six passages, as a moot turn has (k = 6).
    let words: Vec<&str> = passage.split_whitespace().collect();
    let passages = words
        .chunks(words.len().div_ceil(6).max(1))
        .map(|c| c.join(" "))
        .collect();
    let guidance = Guidance {
        passages,
        turns: Default::default(),
        max_words: 0,
        avoid: messages.iter().map(|m| m.content.clone()).collect(),
        exempt: vec!["Moby Dick".into(), "Pride and Prejudice".into()],
        known_words: None,
        steer_words: Vec::new(),
        banned_words: Vec::new(),
    };
    let mut per_token = Vec::new();
    let mut shares = Vec::new();
    let mut rates = Vec::new();
    let mut sample = String::new();
    let mut counts = None;
    for _ in 0..runs.max(1) {
        let setup = Instant::now();
        let guide = QuoteGuide::new(
            vocabulary.clone(),
            &guidance,
            gen_tokens,
            GuideRules::default(),
        );
        let mut timed = Timed {
            inner: guide,
            spent: setup.elapsed(),
        };
        let mut sampler = Sampler::new(0, 0.0, None);
        let generation = model.generate(prompt, gen_tokens, &mut sampler, &mut timed)?;
        let tokens = generation.tokens.len().max(1);
        per_token.push(timed.spent.as_secs_f64() * 1e6 / tokens as f64);
        shares.push(100.0 * timed.spent.as_secs_f64() / generation.generate_time.as_secs_f64());
        rates.push(rate(generation.tokens.len(), generation.generate_time));
        sample = generation.text;
        counts = Some((tokens, timed.inner.counts()));
    }
    if let Some((tokens, counts)) = counts {
        println!(
            "guided generation: {tokens} tokens, {:.1} tok/s; guide {:.0} us/token = {:.2}% of generation time (goal at most 5%; median of {}); {} quotes, {} opened by guidance, {} forced tokens",
            median(&mut rates),
            median(&mut per_token),
            median(&mut shares),
            per_token.len(),
            counts.quotes,
            counts.forced_openings,
            counts.forced_tokens
        );
    }
    println!(
        "guided sample: {}",
        sample
            .chars()
            .take(240)
            .collect::<String>()
            .replace('\n', " ")
    );
    Ok(())
}

/// About `words` words of a real book: the shared corpus's whole Moby
/// Dick when present, else the test excerpt (it holds chapter 1).
fn prompt_text(words: usize) -> String {
    let corpus = [
        "../shared/corpus/moby-dick-2701.txt",
        "/work/shared/corpus/moby-dick-2701.txt",
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/corpus/moby-dick-2701-excerpt.txt"
        ),
    ];
    let text = corpus
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .and_then(|book| book.find("Call me Ishmael").map(|at| book[at..].to_string()))
        .unwrap_or_else(|| {
            "Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse, and nothing particular to interest me on shore, I thought I would sail about a little and see the watery part of the world. "
                .repeat(1 + words / 40)
        });
    text.split_whitespace()
        .take(words)
        .collect::<Vec<_>>()
        .join(" ")
}

fn rate(tokens: usize, time: Duration) -> f64 {
    tokens as f64 / time.as_secs_f64().max(1e-9)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// VmHWM from /proc/self/status (Linux).
fn peak_rss() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(format!("{:.0} MB", kb / 1024.0))
}
