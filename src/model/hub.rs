//! Fetching one file from the Hugging Face hub, or from any server laid out
//! like it (`model.hub_url`), the way `huggingface_hub` does.
//!
//! A file lives at `{endpoint}/{repo}/resolve/{revision}/{file}`. A `HEAD`
//! there, with redirects off except relative ones (a renamed repository
//! answers with a path on the same site), says what the file is:
//! `X-Linked-Etag` (else `ETag`) holds the sha256 of an LFS file,
//! `X-Linked-Size` (else `Content-Length`) its size, `X-Repo-Commit` the
//! commit the revision resolved to, and an absolute `Location` the CDN URL
//! the bytes come from. A file whose etag is not a sha256 (stored in git,
//! not LFS) gets it from the tree API, `{endpoint}/api/models/{repo}/tree/
//! {revision}/{dir}`, whose entries carry `lfs.oid`.
//!
//! The bytes go into a `.partial` file beside the target. A later run sends
//! `Range: bytes=N-` for the rest: a `206` with a matching `Content-Range`
//! is appended, a `200` (the server ignored the range) starts over. Only
//! complete bytes count: the caller checks the size, the sha256 and the
//! GGUF header before renaming the partial file into place.

use std::fs;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

use reqwest::header::{self, HeaderMap};
use reqwest::{StatusCode, Url};

use super::ModelError;

/// The hub's own address (`model.hub_url` default).
pub const DEFAULT_HUB_URL: &str = "https://huggingface.co";
/// The revision used when none is given.
pub const DEFAULT_REVISION: &str = "main";
/// Relative redirects a `HEAD` follows (renamed repositories).
const MAX_RELATIVE_REDIRECTS: usize = 5;

/// A file on the hub: which repository, which file in it, at which revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubFile {
    /// `owner/name`.
    pub repo: String,
    /// Path inside the repository, e.g. `smollm2-1.7b-instruct-q4_k_m.gguf`.
    pub file: String,
    /// Branch, tag or commit.
    pub revision: String,
}

impl HubFile {
    /// Checks the parts: `owner/name` of letters, digits, `-`, `_` and `.`;
    /// a relative file path without `.` or `..` parts; a non-empty revision.
    pub fn new(repo: &str, file: &str, revision: &str) -> Result<HubFile, ModelError> {
        let bad = |what: String| Err(ModelError::Config(what));
        let name_ok = |part: &str| {
            !part.is_empty()
                && part != "."
                && part != ".."
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        let mut parts = repo.split('/');
        let (Some(owner), Some(name), None) = (parts.next(), parts.next(), parts.next()) else {
            return bad(format!("hub repository `{repo}` is not `owner/name`"));
        };
        if !name_ok(owner) || !name_ok(name) {
            return bad(format!(
                "hub repository `{repo}`: owner and name are letters, digits, `-`, `_` and `.`"
            ));
        }
        if file.is_empty()
            || file.starts_with('/')
            || file
                .split('/')
                .any(|part| part.is_empty() || part == "." || part == "..")
            || file.chars().any(char::is_control)
        {
            return bad(format!(
                "hub file `{file}` is not a path inside the repository"
            ));
        }
        if revision.is_empty() || revision.chars().any(char::is_control) {
            return bad(format!("hub revision `{revision}` is empty or unprintable"));
        }
        Ok(HubFile {
            repo: repo.to_string(),
            file: file.to_string(),
            revision: revision.to_string(),
        })
    }

    /// `{endpoint}/{repo}/resolve/{revision}/{file}`, the revision encoded
    /// whole (`refs/pr/1` is one segment) and the file with its slashes, as
    /// `huggingface_hub.hf_hub_url` builds it.
    pub fn resolve_url(&self, endpoint: &str) -> String {
        format!(
            "{}/{}/resolve/{}/{}",
            endpoint.trim_end_matches('/'),
            self.repo,
            encode(&self.revision, false),
            encode(&self.file, true)
        )
    }

    /// The tree API listing of the file's directory.
    fn tree_url(&self, endpoint: &str) -> String {
        let mut url = format!(
            "{}/api/models/{}/tree/{}",
            endpoint.trim_end_matches('/'),
            self.repo,
            encode(&self.revision, false)
        );
        if let Some((dir, _)) = self.file.rsplit_once('/') {
            url.push('/');
            url.push_str(&encode(dir, true));
        }
        url
    }

    /// The file's own name (the last part of its path).
    pub fn file_name(&self) -> &str {
        self.file.rsplit('/').next().unwrap_or(&self.file)
    }

    fn describe(&self) -> String {
        format!("{} in {} at {}", self.file, self.repo, self.revision)
    }
}

/// Percent-encoding of a URL path part: unreserved characters stay (and `/`
/// when `keep_slash`), every other byte is `%XX` (Python's `quote`).
fn encode(text: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric()
            || matches!(byte, b'-' | b'.' | b'_' | b'~')
            || (keep_slash && byte == b'/')
        {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Checks a `model.hub_url`: an http(s) URL.
pub fn check_endpoint(endpoint: &str) -> Result<(), ModelError> {
    let parsed = Url::parse(endpoint)
        .map_err(|e| ModelError::Config(format!("model.hub_url `{endpoint}`: {e}")))?;
    if matches!(parsed.scheme(), "http" | "https") {
        Ok(())
    } else {
        Err(ModelError::Config(format!(
            "model.hub_url `{endpoint}` must be an http:// or https:// URL"
        )))
    }
}

/// What the hub says of a file before it is downloaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteFile {
    /// Size in bytes (of the LFS file, not its pointer).
    pub size: u64,
    /// Lowercase hex sha256, when the hub gave one.
    pub sha256: Option<String>,
    /// The commit the revision resolved to (`X-Repo-Commit`).
    pub commit: Option<String>,
    /// Where the bytes are (the CDN URL of a redirect, else the file's URL).
    pub location: String,
}

/// How a download went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fetched {
    /// Bytes already in the partial file that were kept (0: from the start).
    pub resumed_from: u64,
    /// Bytes received in this run.
    pub received: u64,
}

/// Network bounds for the hub (from the `fetch.*` settings).
#[derive(Debug, Clone, Copy)]
pub struct HubLimits {
    pub connect_timeout: Duration,
    /// Longest wait for the next bytes (not for the whole download, which
    /// may take hours).
    pub read_timeout: Duration,
    /// Redirects the download follows (the CDN may redirect again).
    pub max_redirects: usize,
}

/// An HTTP client for one hub endpoint.
pub struct HubClient {
    endpoint: String,
    runtime: tokio::runtime::Runtime,
    /// For `HEAD` and the API: redirects are handled by hand.
    manual: reqwest::Client,
    /// For the bytes: follows redirects.
    follow: reqwest::Client,
}

impl HubClient {
    pub fn new(endpoint: &str, limits: HubLimits) -> Result<HubClient, ModelError> {
        check_endpoint(endpoint)?;
        let endpoint = endpoint.trim_end_matches('/').to_string();
        // reqwest is built without a default TLS provider; ring is the
        // project's. A second install (by another module) is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ModelError::Download(format!("cannot start the HTTP runtime: {e}")))?;
        let build = |policy: reqwest::redirect::Policy| {
            let _entered = runtime.enter();
            reqwest::Client::builder()
                .connect_timeout(limits.connect_timeout)
                .read_timeout(limits.read_timeout)
                .redirect(policy)
                .user_agent(concat!("grove/", env!("CARGO_PKG_VERSION")))
                .build()
                .map_err(|e| ModelError::Download(format!("cannot build the HTTP client: {e}")))
        };
        let manual = build(reqwest::redirect::Policy::none())?;
        let follow = build(reqwest::redirect::Policy::limited(limits.max_redirects))?;
        Ok(HubClient {
            endpoint,
            runtime,
            manual,
            follow,
        })
    }

    /// The file's size, sha256, commit and download location, from a `HEAD`
    /// of its resolve URL (and the tree API when the etag is no sha256).
    pub fn metadata(&self, file: &HubFile) -> Result<RemoteFile, ModelError> {
        self.runtime.block_on(async {
            let mut remote = self.head(file).await?;
            if remote.sha256.is_none() {
                remote.sha256 = self.tree_sha256(file).await?;
            }
            Ok(remote)
        })
    }

    async fn head(&self, file: &HubFile) -> Result<RemoteFile, ModelError> {
        let mut url = parse_url(&file.resolve_url(&self.endpoint))?;
        for _ in 0..=MAX_RELATIVE_REDIRECTS {
            let response = self
                .manual
                .head(url.clone())
                // The size of the file itself, not of a compressed answer.
                .header(header::ACCEPT_ENCODING, "identity")
                .send()
                .await
                .map_err(|e| transport_error(&url, &e))?;
            let status = response.status();
            let headers = response.headers();
            if status.is_redirection() {
                let location = text_header(headers, header::LOCATION).ok_or_else(|| {
                    ModelError::Download(format!("{url} answered {status} with no Location"))
                })?;
                if Url::parse(&location).is_ok() {
                    // Absolute: the CDN holding the bytes.
                    return remote_file(file, headers, location);
                }
                // Relative: the repository moved on the same site.
                url = url.join(&location).map_err(|e| {
                    ModelError::Download(format!("bad redirect `{location}` from {url}: {e}"))
                })?;
                continue;
            }
            if !status.is_success() {
                return Err(refusal(file, status, headers));
            }
            return remote_file(file, headers, url.to_string());
        }
        Err(ModelError::Download(format!(
            "more than {MAX_RELATIVE_REDIRECTS} redirects for {}",
            file.describe()
        )))
    }

    /// The file's `lfs.oid` from the tree API, if it is an LFS file (and the
    /// server has the API).
    async fn tree_sha256(&self, file: &HubFile) -> Result<Option<String>, ModelError> {
        let url = parse_url(&file.tree_url(&self.endpoint))?;
        let response = self
            .follow
            .get(url.clone())
            .send()
            .await
            .map_err(|e| transport_error(&url, &e))?;
        if !response.status().is_success() {
            // A mirror without the API: no sha256 from it (--sha256 then
            // has to say what the file must be).
            return Ok(None);
        }
        let body = response
            .bytes()
            .await
            .map_err(|e| transport_error(&url, &e))?;
        let entries: Vec<TreeEntry> = serde_json::from_slice(&body).map_err(|e| {
            ModelError::Download(format!("{url} did not answer a tree listing: {e}"))
        })?;
        Ok(entries
            .into_iter()
            .find(|entry| entry.path == file.file)
            .and_then(|entry| entry.lfs)
            .map(|lfs| lfs.oid.to_ascii_lowercase())
            .filter(|oid| is_sha256(oid)))
    }

    /// Downloads `remote` into `partial`, keeping bytes already there and
    /// asking only for the rest. On a network error the bytes received so
    /// far stay in `partial` (synced), for the next run to resume; a failure
    /// that leaves no bytes removes `partial`.
    pub fn download(
        &self,
        remote: &RemoteFile,
        partial: &Path,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Fetched, ModelError> {
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(partial)
            .map_err(|e| file_error("cannot open", partial, &e))?;
        lock(&file, partial)?;
        let mut have = file
            .metadata()
            .map_err(|e| file_error("cannot read", partial, &e))?
            .len();
        if have > remote.size {
            // Not a prefix of this file: start over.
            file.set_len(0)
                .map_err(|e| file_error("cannot truncate", partial, &e))?;
            have = 0;
        }
        let resumed_from = have;
        if have == remote.size {
            progress(have, remote.size);
            return Ok(Fetched {
                resumed_from,
                received: 0,
            });
        }
        let fetched = self
            .runtime
            .block_on(self.fetch_into(remote, file, partial, have, progress));
        // A failure that leaves no bytes to resume leaves no file either.
        if fetched.is_err() && fs::metadata(partial).is_ok_and(|m| m.len() == 0) {
            let _ = fs::remove_file(partial);
        }
        fetched
    }

    async fn fetch_into(
        &self,
        remote: &RemoteFile,
        mut file: fs::File,
        partial: &Path,
        have: u64,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Fetched, ModelError> {
        let download = Download {
            url: parse_url(&remote.location)?,
            size: remote.size,
            partial,
        };
        let mut request = self
            .follow
            .get(download.url.clone())
            .header(header::ACCEPT_ENCODING, "identity");
        if have > 0 {
            request = request.header(header::RANGE, format!("bytes={have}-"));
        }
        let mut response = request
            .send()
            .await
            .map_err(|e| transport_error(&download.url, &e))?;
        let resumed_from = download.resume_point(&response, &mut file, have)?;
        file.seek(SeekFrom::Start(resumed_from))
            .map_err(|e| file_error("cannot seek in", partial, &e))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let mut have = resumed_from;
        progress(have, remote.size);
        let streamed = download
            .stream(&mut response, &mut out, &mut have, progress)
            .await;
        download.keep(out)?;
        download.judge_end(streamed, have)?;
        Ok(Fetched {
            resumed_from,
            received: have - resumed_from,
        })
    }
}

/// One download of a file's bytes into its partial file.
struct Download<'a> {
    /// Where the bytes come from.
    url: Url,
    /// The file's whole size, as the hub announced it.
    size: u64,
    partial: &'a Path,
}

impl Download<'_> {
    /// Where the answer's bytes start in the partial file holding `have`
    /// bytes: `have` for a matching `206`, 0 for a `200` (the partial file is
    /// emptied). A mismatched range or a `416` empties it and fails.
    fn resume_point(
        &self,
        response: &reqwest::Response,
        file: &mut fs::File,
        have: u64,
    ) -> Result<u64, ModelError> {
        let (url, partial) = (&self.url, self.partial);
        let status = response.status();
        match status {
            StatusCode::PARTIAL_CONTENT if have > 0 => {
                let range = text_header(response.headers(), header::CONTENT_RANGE);
                match range.as_deref().and_then(parse_content_range) {
                    Some((start, total))
                        if start == have && total.is_none_or(|t| t == self.size) =>
                    {
                        Ok(have)
                    }
                    _ => {
                        file.set_len(0)
                            .map_err(|e| file_error("cannot truncate", partial, &e))?;
                        Err(ModelError::Download(format!(
                            "{url} answered bytes {} to a request for bytes {have}- of {}; \
                             the partial download was discarded, run the install again",
                            range.unwrap_or_else(|| "(no Content-Range)".into()),
                            self.size
                        )))
                    }
                }
            }
            StatusCode::OK => {
                // The server sends the whole file (it ignored the range).
                file.set_len(0)
                    .map_err(|e| file_error("cannot truncate", partial, &e))?;
                Ok(0)
            }
            StatusCode::RANGE_NOT_SATISFIABLE => {
                file.set_len(0)
                    .map_err(|e| file_error("cannot truncate", partial, &e))?;
                Err(ModelError::Download(format!(
                    "{url} cannot serve bytes {have}- (416); the partial download was \
                     discarded, run the install again"
                )))
            }
            _ => Err(ModelError::Download(format!(
                "fetching {url} failed: HTTP {status}"
            ))),
        }
    }

    /// Writes the answer's bytes to `out` until it ends, fails, or would
    /// pass the announced size; `have` counts the bytes in the file.
    async fn stream(
        &self,
        response: &mut reqwest::Response,
        out: &mut BufWriter<fs::File>,
        have: &mut u64,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<(), ModelError> {
        loop {
            match response.chunk().await {
                Ok(Some(piece)) => {
                    if *have + piece.len() as u64 > self.size {
                        return Err(ModelError::Download(format!(
                            "{} sent more than the {} bytes the hub announced",
                            self.url, self.size
                        )));
                    }
                    out.write_all(&piece)
                        .map_err(|e| file_error("cannot write", self.partial, &e))?;
                    *have += piece.len() as u64;
                    progress(*have, self.size);
                }
                Ok(None) => return Ok(()),
                Err(e) => return Err(transport_error(&self.url, &e)),
            }
        }
    }

    /// Flushes and syncs what arrived, whatever happened, for the next run.
    fn keep(&self, out: BufWriter<fs::File>) -> Result<(), ModelError> {
        let file = out
            .into_inner()
            .map_err(|e| file_error("cannot write", self.partial, e.error()))?;
        file.sync_all()
            .map_err(|e| file_error("cannot write", self.partial, &e))
    }

    /// The download's outcome once its bytes are kept: a stream that failed
    /// or ended short says how to resume.
    fn judge_end(&self, streamed: Result<(), ModelError>, have: u64) -> Result<(), ModelError> {
        if let Err(e) = streamed {
            return Err(ModelError::Download(format!(
                "{e}; {have} of {} bytes are kept in {}: run the same install again to resume",
                self.size,
                self.partial.display()
            )));
        }
        if have != self.size {
            return Err(ModelError::Download(format!(
                "{} ended after {have} of {} bytes; they are kept in {}: run the same \
                 install again to resume",
                self.url,
                self.size,
                self.partial.display()
            )));
        }
        Ok(())
    }
}

#[derive(serde::Deserialize)]
struct TreeEntry {
    path: String,
    #[serde(default)]
    lfs: Option<TreeLfs>,
}

#[derive(serde::Deserialize)]
struct TreeLfs {
    oid: String,
}

/// The file's metadata from a `HEAD` answer's headers.
fn remote_file(
    file: &HubFile,
    headers: &HeaderMap,
    location: String,
) -> Result<RemoteFile, ModelError> {
    let etag = text_header(headers, "x-linked-etag").or_else(|| text_header(headers, header::ETAG));
    let sha256 = etag
        .map(|etag| normalize_etag(&etag).to_ascii_lowercase())
        .filter(|etag| is_sha256(etag));
    let size = text_header(headers, "x-linked-size")
        .or_else(|| text_header(headers, header::CONTENT_LENGTH))
        .and_then(|size| size.trim().parse::<u64>().ok())
        .ok_or_else(|| {
            ModelError::Download(format!(
                "the hub gave no size (X-Linked-Size or Content-Length) for {}",
                file.describe()
            ))
        })?;
    Ok(RemoteFile {
        size,
        sha256,
        commit: text_header(headers, "x-repo-commit"),
        location,
    })
}

/// An etag without its weak prefix and quotes (`W/"abc"` is `abc`).
pub fn normalize_etag(etag: &str) -> &str {
    let etag = etag.trim();
    etag.strip_prefix("W/").unwrap_or(etag).trim_matches('"')
}

/// Whether `text` is 64 lowercase hex digits.
pub fn is_sha256(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// `bytes START-END/TOTAL` (TOTAL may be `*`): the start and the total.
fn parse_content_range(value: &str) -> Option<(u64, Option<u64>)> {
    let rest = value.trim().strip_prefix("bytes")?.trim_start();
    let (span, total) = rest.split_once('/')?;
    let (start, _end) = span.split_once('-')?;
    let start = start.trim().parse().ok()?;
    let total = match total.trim() {
        "*" => None,
        n => Some(n.parse().ok()?),
    };
    Some((start, total))
}

/// A refusal by the hub, with its own error code when it gives one.
fn refusal(file: &HubFile, status: StatusCode, headers: &HeaderMap) -> ModelError {
    let code = text_header(headers, "x-error-code").unwrap_or_default();
    let message = text_header(headers, "x-error-message")
        .map(|m| format!(" ({m})"))
        .unwrap_or_default();
    let what = match (code.as_str(), status.as_u16()) {
        ("RepoNotFound", _) => format!(
            "repository {} not found (or it is private or gated; grove sends no token)",
            file.repo
        ),
        ("RevisionNotFound", _) => {
            format!("revision {} not found in {}", file.revision, file.repo)
        }
        ("EntryNotFound", _) => format!(
            "no file {} in {} at {}",
            file.file, file.repo, file.revision
        ),
        ("GatedRepo", _) | (_, 401 | 403) => format!(
            "{} is gated or private and grove sends no token: download the file yourself \
             and install it with --gguf",
            file.repo
        ),
        (_, 404) => format!("{} not found", file.describe()),
        _ => format!("the hub answered HTTP {status} for {}", file.describe()),
    };
    ModelError::Download(format!("{what}{message}"))
}

fn text_header(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .map(str::to_string)
}

fn parse_url(url: &str) -> Result<Url, ModelError> {
    Url::parse(url).map_err(|e| ModelError::Config(format!("invalid hub URL {url}: {e}")))
}

/// A transport error with its causes (refused, reset, timed out…).
fn transport_error(url: &Url, e: &reqwest::Error) -> ModelError {
    let mut out = crate::source::describe(e);
    if e.is_timeout() {
        out.push_str("; the limits are fetch.connect_timeout_secs and fetch.timeout_secs");
    }
    ModelError::Download(format!("{url}: {out}"))
}

fn file_error(what: &str, path: &Path, e: &std::io::Error) -> ModelError {
    ModelError::File(format!("{what} {}: {e}", path.display()))
}

/// One download of a file at a time: an exclusive lock on its partial file
/// (released when the file is closed).
fn lock(file: &fs::File, path: &Path) -> Result<(), ModelError> {
    // SAFETY: flock on a descriptor this function's caller owns and keeps open.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if locked == 0 {
        return Ok(());
    }
    Err(ModelError::File(format!(
        "{} is being written by another install ({})",
        path.display(),
        std::io::Error::last_os_error()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_laid_out_and_encoded_as_the_hub_client_does() {
        let file = HubFile::new(
            "HuggingFaceTB/SmolLM2-1.7B-Instruct-GGUF",
            "sub dir/smollm2-1.7b-instruct-q4_k_m.gguf",
            "refs/pr/1",
        )
        .expect("valid");
        assert_eq!(
            file.resolve_url("https://huggingface.co/"),
            "https://huggingface.co/HuggingFaceTB/SmolLM2-1.7B-Instruct-GGUF/resolve/\
             refs%2Fpr%2F1/sub%20dir/smollm2-1.7b-instruct-q4_k_m.gguf"
        );
        assert_eq!(
            file.tree_url("http://h"),
            "http://h/api/models/HuggingFaceTB/SmolLM2-1.7B-Instruct-GGUF/tree/refs%2Fpr%2F1/sub%20dir"
        );
        assert_eq!(file.file_name(), "smollm2-1.7b-instruct-q4_k_m.gguf");
    }

    #[test]
    fn bad_names_are_refused() {
        for (repo, file) in [
            ("noslash", "a.gguf"),
            ("a/b/c", "a.gguf"),
            ("a/..", "a.gguf"),
            ("a/b", "../x.gguf"),
            ("a/b", "/x.gguf"),
            ("a/b", "d//x.gguf"),
            ("a/b", ""),
            ("a b/c", "x.gguf"),
        ] {
            assert!(HubFile::new(repo, file, "main").is_err(), "{repo} {file}");
        }
        assert!(HubFile::new("a/b", "x.gguf", "").is_err());
    }

    #[test]
    fn etags_and_ranges_parse() {
        let sha = "a".repeat(64);
        assert_eq!(normalize_etag(&format!("\"{sha}\"")), sha);
        assert_eq!(normalize_etag("W/\"abc\""), "abc");
        assert!(is_sha256(&sha));
        assert!(!is_sha256("b1797ada900fbcebfe7388cefbf28e8e5b0cfe21"));
        assert_eq!(
            parse_content_range("bytes 10-99/100"),
            Some((10, Some(100)))
        );
        assert_eq!(parse_content_range("bytes 10-99/*"), Some((10, None)));
        assert_eq!(parse_content_range("items 1-2/3"), None);
    }
}
