//! `grove-bench model [--model FILE] [--runs N] [--reps N] [--flash-attn on,off] [--gen N] [--prompt-words
//! N,N] [--threads N,N] [--python PYTHON] [--no-llama-cpp] [--dump-prompt
//! FILE] [--turn-runs N] [--turns-only]`:
//! the embedded model's load time, prompt and generation speed against
//! llama.cpp's in the same run (through `model_llama_cpp.py`, when the
//! python, `$GROVE_BENCH_PYTHON` or `python3`, imports `llama_cpp`), for
//! each prompt size (120 and 880 words: 224 and 1,353 tokens) and thread
//! count (1 and 2), and each of llama.cpp's attention paths (flash
//! attention on and off, the same in both engines), runs interleaved (each
//! run the medians of `--reps` generations of each engine, 5 by default);
//! peak RSS of both; and the cost of
//! guided decoding per token (the guide's own time, measured
//! around each `constrain` and `accept` call of a guided generation, with
//! every rule on: verbatim clause-aligned quotes from six passages, and the
//! copy rule over the whole prompt), as a share of generation time; and
//! the time of two moot turns of one speaker with the prefix cache on and
//! off (see [`turn_times`]; `--turn-runs 0` leaves it out, `--turns-only`
//! runs only it).
//!
//! Generation runs greedy with the stop tokens masked, so every run decodes
//! exactly `--gen` tokens; the table says whether llama.cpp picked the same
//! tokens. `--dump-prompt FILE` keeps the prompt file given to
//! `model_llama_cpp.py` (the last one). The prompt is a moot-sized chat built from a book
//! of the shared corpus when present (else the test excerpt of it in
//! `tests/data/corpus`), else from fixed text.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use grove::model::FlashAttention;
use grove::model::embedded::{EmbeddedModel, EmbeddedOptions};
use grove::model::guide::{Guidance, GuideRules, QuoteGuide};
use grove::model::sampling::{DecodeGuide, GuideControl, Sampler, Unguided};
use grove::model::{ChatMessage, ChatModel, ChatRequest, ModelError, Role};
use grove::moot::prompt::Line;
use grove::moot::speaker::{TurnRequest, speak};
use grove::moot::{Move, Passage, Tree};

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
    /// All of the guide's time: its set-up, and each step's.
    spent: Duration,
    /// Of it, the set-up and the time in `constrain`.
    setup: Duration,
    constraining: Duration,
}

impl<G> Timed<G> {
    /// A guide whose set-up took `setup`.
    fn set_up(inner: G, setup: Duration) -> Timed<G> {
        Timed {
            inner,
            spent: setup,
            setup,
            constraining: Duration::ZERO,
        }
    }
}

impl<G: DecodeGuide> DecodeGuide for Timed<G> {
    fn constrain(&mut self, logits: &mut [f32]) {
        let started = Instant::now();
        self.inner.constrain(logits);
        self.spent += started.elapsed();
        self.constraining += started.elapsed();
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

/// One row of the speed table.
struct Row {
    prompt_tokens: usize,
    threads: usize,
    flash: FlashAttention,
    grove: Rates,
    llama: Option<Rates>,
    same_tokens: Option<bool>,
}

/// The command line.
struct Args {
    model_path: Option<PathBuf>,
    runs: usize,
    gen_tokens: usize,
    prompt_words: Vec<usize>,
    thread_counts: Vec<usize>,
    dump_prompt: Option<PathBuf>,
    python: String,
    llama_cpp: bool,
    turn_runs: usize,
    turns_only: bool,
    /// Samples of each engine in one interleaved run (at least 1); the
    /// run's rates are their medians.
    reps: usize,
    /// llama.cpp's attention paths to measure, each the same in both
    /// engines (`--flash-attn on,off`).
    flash: Vec<FlashAttention>,
}

/// One row's setting: the prompt's words, the threads, and llama.cpp's
/// attention path in both engines.
#[derive(Clone, Copy)]
struct Setting {
    words: usize,
    threads: usize,
    flash: FlashAttention,
}

const USAGE: &str = "grove-bench model [--model FILE] [--runs N] [--reps N] [--flash-attn on,off] [--gen N] [--prompt-words N,N] [--threads N,N] [--python PYTHON] [--no-llama-cpp] [--dump-prompt FILE] [--turn-runs N] [--turns-only]";

fn parse_args(args: &[String]) -> anyhow::Result<Args> {
    let mut a = Args {
        model_path: None,
        runs: 3,
        gen_tokens: 64,
        prompt_words: vec![120, 880],
        thread_counts: vec![1, 2],
        dump_prompt: None,
        python: std::env::var("GROVE_BENCH_PYTHON").unwrap_or_else(|_| "python3".into()),
        llama_cpp: true,
        turn_runs: 3,
        turns_only: false,
        reps: 5,
        flash: vec![FlashAttention::On, FlashAttention::Off],
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
            "--reps" => a.reps = value()?.parse::<usize>().context("--reps")?.max(1),
            "--flash-attn" => {
                // The script's two paths, spelled as the config spells them.
                a.flash = (value()?.split(','))
                    .map(|v| {
                        [FlashAttention::On, FlashAttention::Off]
                            .into_iter()
                            .find(|f| f.as_str() == v.trim())
                            .with_context(|| format!("--flash-attn: on or off, not {v}"))
                    })
                    .collect::<anyhow::Result<_>>()?
            }
            "--gen" => a.gen_tokens = value()?.parse().context("--gen")?,
            "--prompt-words" => a.prompt_words = list(value()?, "--prompt-words")?,
            "--threads" => a.thread_counts = list(value()?, "--threads")?,
            "--dump-prompt" => a.dump_prompt = Some(PathBuf::from(value()?)),
            "--python" => a.python = value()?.clone(),
            "--no-llama-cpp" => a.llama_cpp = false,
            "--turn-runs" => a.turn_runs = value()?.parse().context("--turn-runs")?,
            "--turns-only" => a.turns_only = true,
            other => bail!("unknown argument {other}; usage: {USAGE}"),
        }
    }
    Ok(a)
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let args = parse_args(args)?;
    let path = match &args.model_path {
        Some(path) => path.clone(),
        None => {
            let state = std::env::var_os("GROVE_STATE_DIR")
                .map(PathBuf::from)
                .or_else(|| dirs::data_local_dir().map(|d| d.join("grove")))
                .context("no --model and no state directory")?;
            grove::model::install::default_model_file(&grove::model::install::model_dir(&state))
        }
    };
    let turn_threads = args.thread_counts.first().copied().unwrap_or(1);
    if args.turns_only {
        return turn_times(&path, turn_threads, args.turn_runs.max(1));
    }
    let quantization = grove::model::embedded::file_quantization(&path)?;
    let llama_cpp = args.llama_cpp
        && std::process::Command::new(&args.python)
            .args(["-c", "import llama_cpp"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
    println!(
        "model: {} ({quantization}, usable cores: {}); llama.cpp: {}",
        path.display(),
        grove::model::usable_cores(),
        if llama_cpp {
            format!("{} {LLAMA_CPP_SCRIPT}", args.python)
        } else {
            "not importable (set GROVE_BENCH_PYTHON or --python to a python with llama_cpp)".into()
        }
    );
    let mut table = Vec::new();
    let mut llama_rss = 0f64;
    let mut sample_text = String::new();
    for &words in &args.prompt_words {
        for &threads in &args.thread_counts {
            for &flash in &args.flash {
                let setting = Setting {
                    words,
                    threads,
                    flash,
                };
                let first = table.is_empty();
                let (row, rss, sample) = measure(&args, &path, setting, llama_cpp, first)?;
                table.push(row);
                llama_rss = llama_rss.max(rss);
                sample_text = sample;
            }
        }
    }
    print_table(&args, &table, llama_rss);
    println!(
        "sample: {}",
        sample_text
            .chars()
            .take(160)
            .collect::<String>()
            .replace('\n', " ")
    );
    if args.turn_runs > 0 {
        turn_times(&path, turn_threads, args.turn_runs)?;
    }
    Ok(())
}

const LLAMA_CPP_SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/src/bin/grove-bench/model_llama_cpp.py"
);

/// One prompt size and thread count: a load, then `runs` interleaved
/// rounds of grove and llama.cpp (so both see the same machine load; who
/// goes first alternates), each engine's rates in a round the medians of
/// `--reps` generations in one warm process (a single generation on a
/// shared machine swings by 30 % either way), and
/// with `guided`, the guide's cost. Also llama.cpp's peak RSS and grove's
/// last text.
fn measure(
    args: &Args,
    path: &std::path::Path,
    setting: Setting,
    llama_cpp: bool,
    guided: bool,
) -> anyhow::Result<(Row, f64, String)> {
    let Setting { words, threads, .. } = setting;
    let (model, load) = timed(|| EmbeddedModel::load(path, speed_options(setting)));
    let mut model = model?;
    let messages = chat(&prompt_text(words));
    let prompt = model.encode_chat(&messages)?;
    let dump_file = dump_prompt(&model, &prompt, args.dump_prompt.as_ref())?;
    println!(
        "{} prompt tokens, {threads} threads, flash attention {}: {} loaded in {:.3} s",
        prompt.len(),
        setting.flash.as_str(),
        grove::model::ChatModel::describe(&model),
        load.as_secs_f64()
    );
    let mut guide = NoStop(model.stop_tokens().to_vec());
    let (mut ours, mut theirs) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
    let (mut same_tokens, mut llama_rss, mut sample) = (None, 0f64, String::new());
    // Of grove's time, the share llama.cpp itself spent (its own timings).
    let mut inside = (Vec::new(), Vec::new());
    for run in 0..args.runs.max(1) {
        // Who goes first alternates, so a drift in the machine's load
        // favours neither.
        let llama_first = llama_cpp && run % 2 == 1;
        let mut llama_run = None;
        if llama_first {
            llama_run = Some(run_llama_cpp(args, path, &dump_file, setting)?);
        }
        let (rates, last) = grove_samples(&mut model, &prompt, args, &mut guide, &mut inside)?;
        ours.0.push(rates.prompt);
        ours.1.push(rates.generation);
        sample = last.text;
        if llama_cpp && !llama_first {
            llama_run = Some(run_llama_cpp(args, path, &dump_file, setting)?);
        }
        if let Some(run) = llama_run {
            same_tokens = Some(same_tokens.unwrap_or(true) && run.tokens == last.tokens);
            theirs.0.push(run.prompt);
            theirs.1.push(run.generation);
            llama_rss = llama_rss.max(run.rss_mb);
        }
    }
    if args.dump_prompt.is_none() {
        let _ = std::fs::remove_file(&dump_file);
    }
    let (grove, llama) = medians(&mut ours, &mut theirs);
    println!(
        "  inside llama.cpp (its own timings): {:.1} % of grove's prompt time, {:.1} % of its \
         generation time; the rest is grove's loop",
        100.0 * median(&mut inside.0),
        100.0 * median(&mut inside.1),
    );
    if guided {
        let passage = prompt_text(words);
        guided_overhead(
            &mut model,
            &prompt,
            &messages,
            &passage,
            args.gen_tokens,
            args.runs,
        )?;
    }
    let row = Row {
        prompt_tokens: prompt.len(),
        threads,
        flash: setting.flash,
        grove,
        llama,
        same_tokens,
    };
    Ok((row, llama_rss, sample))
}

/// What `f` returns, and how long it took.
fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let started = Instant::now();
    let out = f();
    (out, started.elapsed())
}

/// Each engine's medians over the interleaved runs, printed with each
/// run's ratios.
fn medians(
    ours: &mut (Vec<f64>, Vec<f64>),
    theirs: &mut (Vec<f64>, Vec<f64>),
) -> (Rates, Option<Rates>) {
    print_run_ratios(ours, theirs);
    let grove = Rates {
        prompt: median(&mut ours.0),
        generation: median(&mut ours.1),
    };
    let llama = (!theirs.0.is_empty()).then(|| Rates {
        prompt: median(&mut theirs.0),
        generation: median(&mut theirs.1),
    });
    print_rates(&grove, llama.as_ref());
    (grove, llama)
}

/// grove's rates in one interleaved run: the medians of `--reps` greedy
/// generations (llama.cpp's share of each one's time pushed to `inside`),
/// and the last generation.
fn grove_samples(
    model: &mut EmbeddedModel,
    prompt: &[u32],
    args: &Args,
    guide: &mut NoStop,
    inside: &mut (Vec<f64>, Vec<f64>),
) -> anyhow::Result<(Rates, grove::model::embedded::Generation)> {
    let mut rates = (Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..args.reps {
        let (generation, share) = greedy_run(model, prompt, args.gen_tokens, guide)?;
        rates
            .0
            .push(rate(generation.prompt_tokens, generation.prompt_time));
        rates
            .1
            .push(rate(generation.tokens.len(), generation.generate_time));
        inside.0.push(share.0);
        inside.1.push(share.1);
        last = Some(generation);
    }
    let rates = Rates {
        prompt: median(&mut rates.0),
        generation: median(&mut rates.1),
    };
    Ok((rates, last.context("no generation")?))
}

/// Each interleaved run's ratios (grove / llama.cpp), in run order, and
/// how many runs reach 0.95x (the goal holds in every run, not only the
/// median).
fn print_run_ratios(ours: &(Vec<f64>, Vec<f64>), theirs: &(Vec<f64>, Vec<f64>)) {
    if theirs.0.is_empty() {
        return;
    }
    let ratios =
        |a: &[f64], b: &[f64]| -> Vec<f64> { a.iter().zip(b).map(|(x, y)| x / y).collect() };
    let show = |r: &[f64]| {
        let list: Vec<String> = r.iter().map(|x| format!("{x:.2}x")).collect();
        let held = r.iter().filter(|&&x| x >= 0.95).count();
        format!(
            "{} ({held} of {} at or above 0.95x)",
            list.join(", "),
            r.len()
        )
    };
    println!(
        "  each run: prompt {}; generation {}",
        show(&ratios(&ours.0, &theirs.0)),
        show(&ratios(&ours.1, &theirs.1))
    );
}

/// One greedy generation, and the shares of its prompt and generation time
/// that llama.cpp itself spent (its own timings; the rest is grove's loop).
fn greedy_run(
    model: &mut EmbeddedModel,
    prompt: &[u32],
    gen_tokens: usize,
    guide: &mut NoStop,
) -> anyhow::Result<(grove::model::embedded::Generation, (f64, f64))> {
    let mut sampler = Sampler::new(0, 0.0, None);
    model.engine_time();
    let generation = model.generate(prompt, gen_tokens, &mut sampler, guide)?;
    let engine = model.engine_time();
    let share = (
        engine.batches.as_secs_f64() / generation.prompt_time.as_secs_f64(),
        engine.steps.as_secs_f64() / generation.generate_time.as_secs_f64(),
    );
    Ok((generation, share))
}

/// One configuration's medians: grove's, and llama.cpp's with the ratios.
fn print_rates(grove: &Rates, llama: Option<&Rates>) {
    println!(
        "  grove {:.1} / {:.1} tok/s (prompt / generation){}",
        grove.prompt,
        grove.generation,
        llama.map_or(String::new(), |l| format!(
            ", llama.cpp {:.1} / {:.1}: {:.2}x / {:.2}x",
            l.prompt,
            l.generation,
            grove.prompt / l.prompt,
            grove.generation / l.generation
        ))
    );
}

/// The options of the speed rounds.
fn speed_options(setting: Setting) -> EmbeddedOptions {
    EmbeddedOptions {
        flash_attention: setting.flash,
        top_p: None,
        threads: setting.threads,
        guided: true,
        no_repeat_ngram: 0,
        // Each round runs the same prompt: reuse would skip its prefill.
        prefix_cache: false,
        ..EmbeddedOptions::default()
    }
}

/// Writes the prompt for model_llama_cpp.py (as ids and as text) to
/// `keep`, or to a temporary file; returns the file.
fn dump_prompt(
    model: &EmbeddedModel,
    prompt: &[u32],
    keep: Option<&PathBuf>,
) -> anyhow::Result<PathBuf> {
    let file = match keep {
        Some(file) => file.clone(),
        None => {
            std::env::temp_dir().join(format!("grove-bench-prompt-{}.json", std::process::id()))
        }
    };
    let text = model.decode_with_markup(prompt);
    let dump = serde_json::json!({"ids": prompt, "text": text, "stop": model.stop_tokens()});
    std::fs::write(&file, dump.to_string()).with_context(|| format!("{}", file.display()))?;
    Ok(file)
}

fn print_table(args: &Args, table: &[Row], llama_rss: f64) {
    println!(
        "\ngreedy, stop tokens masked, {} generated tokens, median of {} interleaved runs",
        args.gen_tokens,
        args.runs.max(1)
    );
    println!(
        "| prompt | threads | flash attention | grove prompt tok/s | llama.cpp | ratio | grove gen tok/s | llama.cpp | ratio | same tokens |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
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
            "| {} | {} | {} | {:.1} | {lp} | {rp} | {:.1} | {lg} | {rg} | {} |",
            row.prompt_tokens,
            row.threads,
            row.flash.as_str(),
            grove.prompt,
            grove.generation,
            row.same_tokens.map_or("-".to_string(), |s| s.to_string())
        );
    }
    println!(
        "peak RSS: grove {}, llama.cpp {}",
        peak_rss().unwrap_or_else(|| "unknown".into()),
        if llama_rss > 0.0 {
            format!("{llama_rss:.0} MB")
        } else {
            "-".into()
        }
    );
}

/// The embedded model as the moot calls it, counting the prompt tokens it
/// was given and those it ran through the model.
struct Counted<'a> {
    model: &'a mut EmbeddedModel,
    prompt: usize,
    computed: usize,
}

impl ChatModel for Counted<'_> {
    fn complete(&mut self, request: &ChatRequest) -> Result<String, ModelError> {
        let generation = match &request.guidance {
            Some(guidance) => self.model.complete_with_guidance(request, guidance)?.0,
            None => self.model.complete_guided(request, &mut Unguided)?,
        };
        self.prompt += generation.prompt_tokens;
        self.computed += generation.prompt_computed;
        Ok(generation.text.trim().to_string())
    }
    fn describe(&self) -> String {
        self.model.describe()
    }
    fn guides_decoding(&self) -> bool {
        true
    }
}

/// Two turns of one moot speaker through the moot's own `speak` (three
/// guided drafts of one prompt, grading, a retry when the kept draft
/// fails; k 6, max-tokens 160, temperature 0.6, as `grove-bench
/// moot-turns` runs them), on a model with the prefix cache and on one
/// without, interleaved, `runs` times: the median seconds of each turn,
/// the prompt tokens the model computed, and the cut. Turn 1 opens; turn 3
/// answers the other book with six new passages under the same persona.
/// The texts must be the same with and without the cache.
fn turn_times(path: &std::path::Path, threads: usize, runs: usize) -> anyhow::Result<()> {
    let load = |prefix_cache| {
        EmbeddedModel::load(
            path,
            EmbeddedOptions {
                threads,
                prefix_cache,
                ..EmbeddedOptions::default()
            },
        )
    };
    let mut models = [load(true)?, load(false)?];
    let turns = moot_turns();
    // [setting][turn]: seconds per run, and (prompt, computed) tokens.
    let mut seconds = vec![vec![Vec::new(); turns.len()]; 2];
    let mut tokens = vec![vec![(0, 0); turns.len()]; 2];
    let mut texts = vec![Vec::new(); 2];
    for _ in 0..runs {
        for (setting, model) in models.iter_mut().enumerate() {
            for (t, turn) in turns.iter().enumerate() {
                let mut counted = Counted {
                    model,
                    prompt: 0,
                    computed: 0,
                };
                let started = Instant::now();
                let utterance = speak(&mut counted, turn)?;
                seconds[setting][t].push(started.elapsed().as_secs_f64());
                tokens[setting][t] = (counted.prompt, counted.computed);
                texts[setting].push(utterance.raw_text);
            }
        }
    }
    println!(
        "\nmoot turns of one speaker (3 guided drafts, max-tokens 160, {threads} thread(s)), median of {runs} interleaved runs:"
    );
    println!(
        "| turn | prompt tokens (all calls) | computed with reuse | s with reuse | s without | cut |"
    );
    println!("|---|---|---|---|---|---|");
    let names = ["1: opening", "3: new passages, same persona"];
    let (mut with_total, mut without_total) = (0.0, 0.0);
    for (t, name) in names.iter().enumerate() {
        let with = median(&mut seconds[0][t]);
        let without = median(&mut seconds[1][t]);
        with_total += with;
        without_total += without;
        println!(
            "| {name} | {} | {} | {with:.1} | {without:.1} | {:.0}% |",
            tokens[1][t].0,
            tokens[0][t].1,
            100.0 * (1.0 - with / without)
        );
    }
    println!(
        "| both | | | {with_total:.1} | {without_total:.1} | {:.0}% |",
        100.0 * (1.0 - with_total / without_total)
    );
    println!(
        "same texts with and without reuse: {}",
        texts[0] == texts[1]
    );
    Ok(())
}

/// A speaker's opening turn and its next turn (answering the other
/// book's line with six new passages), Moby Dick's passages from
/// [`prompt_text`], 140 words each.
fn moot_turns() -> [TurnRequest; 2] {
    let text = prompt_text(12 * 140);
    let words: Vec<&str> = text.split_whitespace().collect();
    let passage = |i: usize| Passage {
        node_id: format!("fiction/moby-dick#{i}"),
        label: format!("chunk:{i:04}"),
        index: i as u64,
        leaf: String::new(),
        content: words[(i * 140).min(words.len())..((i + 1) * 140).min(words.len())].join(" "),
    };
    let first: Vec<Passage> = (0..6).map(passage).collect();
    let next: Vec<Passage> = (6..12).map(passage).collect();
    let topic = "what people live for".to_string();
    let opening = TurnRequest {
        turn: 1,
        speaker: Tree::new("fiction/moby-dick", "Moby Dick", "Herman Melville"),
        other: Tree::new(
            "fiction/pride-and-prejudice",
            "Pride and Prejudice",
            "Jane Austen",
        ),
        topic: Some(topic.clone()),
        query: topic.clone(),
        passages: first.clone(),
        pool: first.clone(),
        other_turns: Default::default(),
        own_turns: Default::default(),
        incoming: None,
        recent: Vec::new(),
        summary: None,
        mv: Move::Open,
        temperature: 0.6,
        max_tokens: 160,
        seed: 0,
    };
    let incoming = "People live for the good opinion of their neighbours, and a truth universally acknowledged is only what the neighbours say.";
    let reply = TurnRequest {
        turn: 3,
        query: format!("{topic} {incoming}"),
        passages: next.clone(),
        pool: [first, next].concat(),
        other_turns: [(2, incoming.to_string())].into(),
        own_turns: [(
            1,
            "A man goes to sea when he grows grim about the mouth.".to_string(),
        )]
        .into(),
        incoming: Some(Line {
            turn: 2,
            title: "Pride and Prejudice".into(),
            text: incoming.into(),
        }),
        mv: Move::Answer,
        seed: 2,
        ..opening.clone()
    };
    [opening, reply]
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

/// llama.cpp's rates over `--reps` samples in one process (the script's
/// medians).
fn run_llama_cpp(
    args: &Args,
    model: &std::path::Path,
    prompt: &std::path::Path,
    setting: Setting,
) -> anyhow::Result<LlamaRun> {
    let out = std::process::Command::new(&args.python)
        .arg(LLAMA_CPP_SCRIPT)
        .arg(model)
        .arg(prompt)
        .args([
            "--threads",
            &setting.threads.to_string(),
            "--flash-attn",
            setting.flash.as_str(),
            "--gen",
            &args.gen_tokens.to_string(),
            "--runs",
            &args.reps.to_string(),
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
        avoid: messages.iter().map(|m| m.content.clone()).collect(),
        exempt: vec!["Moby Dick".into(), "Pride and Prejudice".into()],
        ..Guidance::default()
    };
    let mut per_token = Vec::new();
    let mut shares = Vec::new();
    let mut rates = Vec::new();
    let mut last_parts = (0.0, 0.0);
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
        let mut timed = Timed::set_up(guide, setup.elapsed());
        let mut sampler = Sampler::new(0, 0.0, None);
        let generation = model.generate(prompt, gen_tokens, &mut sampler, &mut timed)?;
        let tokens = generation.tokens.len().max(1);
        per_token.push(timed.spent.as_secs_f64() * 1e6 / tokens as f64);
        last_parts = (
            timed.setup.as_secs_f64() * 1e3,
            timed.constraining.as_secs_f64() * 1e6 / tokens as f64,
        );
        shares.push(100.0 * timed.spent.as_secs_f64() / generation.generate_time.as_secs_f64());
        rates.push(rate(generation.tokens.len(), generation.generate_time));
        sample = generation.text;
        counts = Some((tokens, timed.inner.counts()));
    }
    let (setup, constraining) = last_parts;
    println!(
        "  of the guide's time (last run): set-up {setup:.1} ms; constrain {constraining:.0} us/token; the rest in accept"
    );
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
    let sample: String = sample.chars().take(240).collect();
    println!("guided sample: {}", sample.replace('\n', " "));
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
