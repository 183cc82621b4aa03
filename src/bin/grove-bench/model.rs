//! `grove-bench model [--model FILE] [--runs N] [--gen N] [--prompt-words
//! N,N] [--threads N,N] [--python PYTHON] [--no-llama-cpp] [--no-requantize]
//! [--candle-llama] [--candle-kernels] [--int8-prefill] [--dump-prompt FILE]`:
//! the embedded model's load time, prompt and generation speed against
//! llama.cpp's in the same run (through `model_llama_cpp.py`, when the
//! python, `$GROVE_BENCH_PYTHON` or `python3`, imports `llama_cpp`), for
//! each prompt size (120 and 880 words: 224 and 1,353 tokens) and thread
//! count (1 and 2), runs interleaved; peak RSS of both; and the cost of
//! guided decoding per token (the guide's own time, measured
//! around each `constrain` and `accept` call of a guided generation, with
//! every rule on: verbatim clause-aligned quotes from six passages, and the
//! copy rule over the whole prompt), as a share of generation time.
//!
//! Generation runs greedy with the stop tokens masked, so every run decodes
//! exactly `--gen` tokens; the table says whether llama.cpp picked the same
//! tokens. `--dump-prompt FILE` keeps the prompt file given to
//! `model_llama_cpp.py` (the last one). The prompt is a moot-sized chat built from a book
//! of the shared corpus when present (else the test excerpt of it in
//! `tests/data/corpus`), else from fixed text.

use std::path::{Path, PathBuf};
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

/// One measured configuration's medians.
struct Rates {
    prompt: f64,
    generation: f64,
}

/// What `grove-bench model` was asked for.
struct Args {
    model_path: Option<PathBuf>,
    runs: usize,
    gen_tokens: usize,
    prompt_words: Vec<usize>,
    thread_counts: Vec<usize>,
    requantize: bool,
    candle_llama: bool,
    grove_kernels: bool,
    dense_prefill: bool,
    dump_prompt: Option<PathBuf>,
    python: String,
    llama_cpp: bool,
}

impl Args {
    fn parse(args: &[String]) -> anyhow::Result<Args> {
        let mut a = Args {
            model_path: None,
            runs: 3,
            gen_tokens: 64,
            prompt_words: vec![120, 880],
            thread_counts: vec![1, 2],
            requantize: true,
            candle_llama: false,
            grove_kernels: true,
            dense_prefill: true,
            dump_prompt: None,
            python: std::env::var("GROVE_BENCH_PYTHON").unwrap_or_else(|_| "python3".into()),
            llama_cpp: true,
        };
        let list = |value: &str, what: &str| -> anyhow::Result<Vec<usize>> {
            value
                .split(',')
                .map(|v| v.trim().parse().with_context(|| format!("{what}: {v}")))
                .collect()
        };
        let mut iter = args.iter();
        while let Some(arg) = iter.next() {
            let mut value = || iter.next().with_context(|| format!("{arg} needs a value"));
            match arg.as_str() {
                "--model" => a.model_path = Some(PathBuf::from(value()?)),
                "--runs" => a.runs = value()?.parse().context("--runs")?,
                "--gen" => a.gen_tokens = value()?.parse().context("--gen")?,
                "--prompt-words" => a.prompt_words = list(value()?, "--prompt-words")?,
                "--threads" => a.thread_counts = list(value()?, "--threads")?,
                "--no-requantize" => a.requantize = false,
                "--candle-llama" => a.candle_llama = true,
                "--candle-kernels" => a.grove_kernels = false,
                "--int8-prefill" => a.dense_prefill = false,
                "--dump-prompt" => a.dump_prompt = Some(PathBuf::from(value()?)),
                "--python" => a.python = value()?.clone(),
                "--no-llama-cpp" => a.llama_cpp = false,
                other => bail!(
                    "unknown argument {other}; usage: grove-bench model [--model FILE] [--runs N] [--gen N] [--prompt-words N,N] [--threads N,N] [--python PYTHON] [--no-llama-cpp] [--no-requantize] [--candle-llama] [--candle-kernels] [--int8-prefill] [--dump-prompt FILE]"
                ),
            }
        }
        Ok(a)
    }

    /// The model file: `--model`, else the installed default under the
    /// state directory.
    fn model_file(&self) -> anyhow::Result<PathBuf> {
        if let Some(path) = &self.model_path {
            return Ok(path.clone());
        }
        let state = std::env::var_os("GROVE_STATE_DIR")
            .map(PathBuf::from)
            .or_else(|| dirs::data_local_dir().map(|d| d.join("grove")))
            .context("no --model and no state directory")?;
        Ok(grove::model::install::default_model_file(
            &grove::model::install::model_dir(&state),
        ))
    }

    /// The forward pass the options select, as the header names it.
    fn forward(&self) -> &'static str {
        match (self.candle_llama, self.grove_kernels, self.dense_prefill) {
            (true, _, _) => "candle-transformers",
            (false, true, _) => "grove, grove kernels",
            (false, false, true) => "grove, candle kernels, float prefill",
            (false, false, false) => "grove, candle kernels, int8 prefill",
        }
    }

    fn options(&self, threads: usize) -> EmbeddedOptions {
        EmbeddedOptions {
            requantize_q4_1: self.requantize,
            top_p: None,
            candle_llama: self.candle_llama,
            grove_kernels: self.grove_kernels,
            dense_prefill: self.dense_prefill,
            threads,
            guided: true,
            no_repeat_ngram: 0,
        }
    }
}

/// The compare script beside this file.
const LLAMA_CPP_SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/src/bin/grove-bench/model_llama_cpp.py"
);

/// One run of the bench: its arguments, the model file, and whether
/// llama.cpp is compared.
struct Bench {
    args: Args,
    path: PathBuf,
    llama_cpp: bool,
}

/// One row of the table: a prompt size and thread count, measured.
struct Row {
    tokens: usize,
    threads: usize,
    grove: Rates,
    llama: Option<Rates>,
    same_tokens: Option<bool>,
}

/// What the runs leave for the summary: llama.cpp's peak RSS and the last
/// sample text.
#[derive(Default)]
struct Summary {
    llama_rss: f64,
    sample_text: String,
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let args = Args::parse(args)?;
    let path = args.model_file()?;
    let quantization = grove::model::embedded::file_quantization(&path)?;
    let llama_cpp = args.llama_cpp
        && std::process::Command::new(&args.python)
            .args(["-c", "import llama_cpp"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
    println!(
        "model: {} ({quantization}, requantize Q4_1 at load: {}, forward: {}, usable cores: {}); llama.cpp: {}",
        path.display(),
        args.requantize,
        args.forward(),
        grove::model::usable_cores(),
        if llama_cpp {
            format!("{} {LLAMA_CPP_SCRIPT}", args.python)
        } else {
            "not importable (set GROVE_BENCH_PYTHON or --python to a python with llama_cpp)".into()
        }
    );
    let bench = Bench {
        args,
        path,
        llama_cpp,
    };
    let mut table = Vec::new();
    let mut summary = Summary::default();
    for &words in &bench.args.prompt_words {
        for &threads in &bench.args.thread_counts {
            table.push(bench.measure(words, threads, &mut summary)?);
        }
    }
    bench.print_table(&table, &summary);
    Ok(())
}

impl Bench {
    /// Loads the model for `threads`, times its runs on a prompt of about
    /// `words` words against llama.cpp's, and prints the rates; the first
    /// configuration also times guided decoding.
    fn measure(&self, words: usize, threads: usize, summary: &mut Summary) -> anyhow::Result<Row> {
        let started = Instant::now();
        let mut model = EmbeddedModel::load(&self.path, self.args.options(threads))?;
        let load = started.elapsed();
        let messages = chat(&prompt_text(words));
        let prompt = model.encode_chat(&messages)?;
        let dump_file = self.dump_prompt(&model, &prompt)?;
        println!(
            "{} prompt tokens, {threads} threads: {} loaded in {:.3} s",
            prompt.len(),
            grove::model::ChatModel::describe(&model),
            load.as_secs_f64()
        );
        let row = self.time_runs(&mut model, &prompt, &dump_file, threads, summary)?;
        if self.args.dump_prompt.is_none() {
            let _ = std::fs::remove_file(&dump_file);
        }
        let grove = &row.grove;
        println!(
            "  grove {:.1} / {:.1} tok/s (prompt / generation){}",
            grove.prompt,
            grove.generation,
            row.llama.as_ref().map_or(String::new(), |l| format!(
                ", llama.cpp {:.1} / {:.1}: {:.2}x / {:.2}x",
                l.prompt,
                l.generation,
                grove.prompt / l.prompt,
                grove.generation / l.generation
            ))
        );
        if words == self.args.prompt_words[0] && threads == self.args.thread_counts[0] {
            guided_overhead(
                &mut model,
                &prompt,
                &messages,
                &prompt_text(words),
                self.args.gen_tokens,
                self.args.runs,
            )?;
        }
        Ok(row)
    }

    /// Writes the prompt for `model_llama_cpp.py`, as ids and as text;
    /// returns the file (`--dump-prompt`, else a temporary one).
    fn dump_prompt(&self, model: &EmbeddedModel, prompt: &[u32]) -> anyhow::Result<PathBuf> {
        let dump_file = match &self.args.dump_prompt {
            Some(file) => file.clone(),
            None => {
                std::env::temp_dir().join(format!("grove-bench-prompt-{}.json", std::process::id()))
            }
        };
        let text = model
            .tokenizer()
            .decode(prompt, false)
            .map_err(anyhow::Error::msg)?;
        let dump = serde_json::json!({"ids": prompt, "text": text, "stop": model.stop_tokens()});
        std::fs::write(&dump_file, dump.to_string())
            .with_context(|| format!("{}", dump_file.display()))?;
        Ok(dump_file)
    }

    /// The runs of one configuration, interleaved: one grove run, then one
    /// llama.cpp run, so both see the same machine load.
    fn time_runs(
        &self,
        model: &mut EmbeddedModel,
        prompt: &[u32],
        dump_file: &Path,
        threads: usize,
        summary: &mut Summary,
    ) -> anyhow::Result<Row> {
        let gen_tokens = self.args.gen_tokens;
        let mut guide = NoStop(model.stop_tokens().to_vec());
        let (mut ours, mut theirs) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
        let mut same_tokens = None;
        for _ in 0..self.args.runs.max(1) {
            let mut sampler = Sampler::new(0, 0.0, None);
            let generation = model.generate(prompt, gen_tokens, &mut sampler, &mut guide)?;
            ours.0
                .push(rate(generation.prompt_tokens, generation.prompt_time));
            ours.1
                .push(rate(generation.tokens.len(), generation.generate_time));
            summary.sample_text = generation.text;
            if self.llama_cpp {
                let run = run_llama_cpp(
                    &self.args.python,
                    LLAMA_CPP_SCRIPT,
                    &self.path,
                    dump_file,
                    threads,
                    gen_tokens,
                )?;
                theirs.0.push(run.prompt);
                theirs.1.push(run.generation);
                summary.llama_rss = summary.llama_rss.max(run.rss_mb);
                same_tokens = Some(run.tokens == generation.tokens);
            }
        }
        Ok(Row {
            tokens: prompt.len(),
            threads,
            grove: Rates {
                prompt: median(&mut ours.0),
                generation: median(&mut ours.1),
            },
            llama: (!theirs.0.is_empty()).then(|| Rates {
                prompt: median(&mut theirs.0),
                generation: median(&mut theirs.1),
            }),
            same_tokens,
        })
    }

    /// The summary: the table of rates, both peak RSS and a sample.
    fn print_table(&self, table: &[Row], summary: &Summary) {
        println!(
            "\ngreedy, stop tokens masked, {} generated tokens, median of {} interleaved runs",
            self.args.gen_tokens,
            self.args.runs.max(1)
        );
        println!(
            "| prompt | threads | grove prompt tok/s | llama.cpp | ratio | grove gen tok/s | llama.cpp | ratio | same tokens |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        for row in table {
            let grove = &row.grove;
            let (lp, lg, rp, rg) = match &row.llama {
                Some(l) => (
                    format!("{:.1}", l.prompt),
                    format!("{:.1}", l.generation),
                    format!("{:.2}x", grove.prompt / l.prompt),
                    format!("{:.2}x", grove.generation / l.generation),
                ),
                None => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            println!(
                "| {} | {} | {:.1} | {lp} | {rp} | {:.1} | {lg} | {rg} | {} |",
                row.tokens,
                row.threads,
                grove.prompt,
                grove.generation,
                row.same_tokens.map_or("-".to_string(), |s| s.to_string())
            );
        }
        println!(
            "peak RSS: grove {}, llama.cpp {}",
            peak_rss().unwrap_or_else(|| "unknown".into()),
            if summary.llama_rss > 0.0 {
                format!("{:.0} MB", summary.llama_rss)
            } else {
                "-".into()
            }
        );
        println!(
            "sample: {}",
            summary
                .sample_text
                .chars()
                .take(160)
                .collect::<String>()
                .replace('\n', " ")
        );
    }
}

/// The bench's moot-sized chat around a passage.
fn chat(passage: &str) -> Vec<ChatMessage> {
    vec![
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
    ]
}

/// One run of `model_llama_cpp.py`.
struct LlamaRun {
    prompt: f64,
    generation: f64,
    rss_mb: f64,
    tokens: Vec<u32>,
}

fn run_llama_cpp(
    python: &str,
    script: &str,
    model: &std::path::Path,
    prompt: &std::path::Path,
    threads: usize,
    gen_tokens: usize,
) -> anyhow::Result<LlamaRun> {
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(model)
        .arg(prompt)
        .args([
            "--threads",
            &threads.to_string(),
            "--gen",
            &gen_tokens.to_string(),
            "--runs",
            "1",
        ])
        .output()
        .context("model_llama_cpp.py")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "model_llama_cpp.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let field = |prefix: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .map(str::to_string)
    };
    let rate_of = |prefix: &str| -> anyhow::Result<f64> {
        let line = field(prefix).with_context(|| format!("no `{prefix}` line in {stdout}"))?;
        let (_, after) = line.split_once(", ").context("rate")?;
        after
            .split_whitespace()
            .next()
            .context("rate")?
            .parse()
            .context("rate")
    };
    let rss_mb = field("peak RSS: ")
        .and_then(|v| v.trim_end_matches(" MB").trim().parse().ok())
        .unwrap_or(0.0);
    let tokens = field("tokens: ")
        .and_then(|v| serde_json::from_str(&v).ok())
        .unwrap_or_default();
    Ok(LlamaRun {
        prompt: rate_of("prompt: ")?,
        generation: rate_of("generation: ")?,
        rss_mb,
        tokens,
    })
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
