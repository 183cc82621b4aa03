//! Reading a book from a path or an http(s) URL, with size limits.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// How books are fetched from http(s) URLs.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FetchSettings {
    pub connect_timeout_secs: u64,
    pub timeout_secs: u64,
    pub max_redirects: usize,
}

impl Default for FetchSettings {
    fn default() -> Self {
        FetchSettings {
            connect_timeout_secs: 10,
            timeout_secs: 120,
            max_redirects: 5,
        }
    }
}

/// Why a book's bytes could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    #[error("no such file: {0}")]
    Missing(PathBuf),
    #[error("{0} is a directory, not a book file")]
    Directory(PathBuf),
    #[error("{path} is a {kind}, not a regular file; copy the book into a file first")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} is over the limit of {limit} bytes (limits.max_book_bytes)")]
    TooLarge { what: String, limit: u64 },
    #[error("invalid URL {url}: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("cannot fetch {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error(
        "cannot fetch {url}: no answer within {secs} s; raise {key} (e.g. GROVE_{env}={more}) if the server is slow"
    )]
    TimedOut {
        url: String,
        secs: u64,
        /// The config key that bounds this wait.
        key: &'static str,
        env: &'static str,
        more: u64,
    },
    #[error("fetching {url} failed: HTTP {status}")]
    Status { url: String, status: u16 },
    #[error(
        "cannot fetch {url}: the server sent {encoding}-encoded content (Content-Encoding: {encoding}), which grove does not decode; download and decode it with another tool (e.g. `curl --compressed -o book.txt URL`) and add the file"
    )]
    Encoded { url: String, encoding: String },
}

/// The longest server-sent encoding name an error quotes.
const MAX_ENCODING_SHOWN: usize = 40;

/// The response's `Content-Encoding` when it is anything but `identity`:
/// grove asks for identity and does not decode, so compressed bytes would
/// otherwise be refused later as "NUL bytes" or "not text". The name comes
/// from the server, so it is escaped and cut before anyone prints it.
fn content_encoding(headers: &reqwest::header::HeaderMap) -> Option<String> {
    let raw = headers.get(reqwest::header::CONTENT_ENCODING)?;
    let text = String::from_utf8_lossy(raw.as_bytes());
    let name = text.trim();
    if name.is_empty() || name.eq_ignore_ascii_case("identity") {
        return None;
    }
    let mut shown: String = name.chars().flat_map(char::escape_debug).collect();
    if shown.chars().count() > MAX_ENCODING_SHOWN {
        shown = shown.chars().take(MAX_ENCODING_SHOWN).collect::<String>() + "…";
    }
    Some(shown)
}

/// Whether the argument names an http(s) URL rather than a path.
pub fn is_url(arg: &str) -> bool {
    let lower = arg.get(..8).unwrap_or(arg).to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// Reads a local file, refusing directories and files over `max_bytes`
/// before reading them.
pub fn read_path(path: &Path, max_bytes: u64) -> Result<Vec<u8>, SourceError> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => SourceError::Missing(path.to_path_buf()),
        _ => SourceError::Io {
            path: path.to_path_buf(),
            source: e,
        },
    })?;
    if meta.is_dir() {
        return Err(SourceError::Directory(path.to_path_buf()));
    }
    if !meta.is_file() {
        // A FIFO with no writer would block the read forever; devices and
        // sockets have no size to check first.
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        let kind = if t.is_fifo() {
            "named pipe (FIFO)"
        } else if t.is_socket() {
            "socket"
        } else if t.is_char_device() || t.is_block_device() {
            "device"
        } else {
            "special file"
        };
        return Err(SourceError::NotRegular {
            path: path.to_path_buf(),
            kind,
        });
    }
    let too_large = || SourceError::TooLarge {
        what: path.display().to_string(),
        limit: max_bytes,
    };
    if meta.len() > max_bytes {
        return Err(too_large());
    }
    let file = std::fs::File::open(path).map_err(|e| SourceError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    // The file may grow between stat and read: read at most one byte past the limit.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| SourceError::Io {
            path: path.to_path_buf(),
            source: e,
        })?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_large());
    }
    Ok(bytes)
}

/// Downloads a URL with timeouts, bounded redirects and a size limit checked
/// both against Content-Length and while streaming. `progress` gets
/// (bytes so far, expected total if known).
pub async fn fetch_url(
    url: &str,
    settings: &FetchSettings,
    max_bytes: u64,
    progress: &mut (dyn FnMut(u64, Option<u64>) + Send),
) -> Result<Vec<u8>, SourceError> {
    let parsed = reqwest::Url::parse(url).map_err(|e| SourceError::BadUrl {
        url: url.to_string(),
        reason: e.to_string(),
    })?;
    let client = fetch_client(url, settings)?;
    let unreachable = |e: reqwest::Error| fetch_error(url, settings, &e);
    let mut response = client
        .get(parsed)
        .header(reqwest::header::ACCEPT_ENCODING, "identity")
        .send()
        .await
        .map_err(unreachable)?;
    check_answer(&response, url)?;
    let too_large = || SourceError::TooLarge {
        what: url.to_string(),
        limit: max_bytes,
    };
    let expected = response.content_length();
    if expected.is_some_and(|n| n > max_bytes) {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(expected.unwrap_or(0) as usize);
    while let Some(piece) = response.chunk().await.map_err(unreachable)? {
        if (bytes.len() + piece.len()) as u64 > max_bytes {
            return Err(too_large());
        }
        bytes.extend_from_slice(&piece);
        progress(bytes.len() as u64, expected);
    }
    Ok(bytes)
}

/// An HTTP client with the fetch settings' timeouts and redirect bound.
fn fetch_client(url: &str, settings: &FetchSettings) -> Result<reqwest::Client, SourceError> {
    // rustls needs a process-wide crypto provider; a second install is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(settings.connect_timeout_secs))
        .timeout(Duration::from_secs(settings.timeout_secs))
        .redirect(reqwest::redirect::Policy::limited(settings.max_redirects))
        .user_agent(concat!("grove/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| SourceError::Unreachable {
            url: url.to_string(),
            reason: e.to_string(),
        })
}

/// What a failed request or read of `url` is: a timeout names the setting
/// that bounded it, anything else says why the server was not reached.
fn fetch_error(url: &str, settings: &FetchSettings, e: &reqwest::Error) -> SourceError {
    if e.is_timeout() {
        // A connect that timed out is bounded by its own key.
        let (key, env, secs) = if e.is_connect() {
            (
                "fetch.connect_timeout_secs",
                "FETCH__CONNECT_TIMEOUT_SECS",
                settings.connect_timeout_secs,
            )
        } else {
            (
                "fetch.timeout_secs",
                "FETCH__TIMEOUT_SECS",
                settings.timeout_secs,
            )
        };
        return SourceError::TimedOut {
            url: url.to_string(),
            secs,
            key,
            env,
            more: secs.saturating_mul(4),
        };
    }
    SourceError::Unreachable {
        url: url.to_string(),
        reason: describe(e),
    }
}

/// Refuses an answer that is not a success or whose body is encoded.
fn check_answer(response: &reqwest::Response, url: &str) -> Result<(), SourceError> {
    let status = response.status();
    if !status.is_success() {
        return Err(SourceError::Status {
            url: url.to_string(),
            status: status.as_u16(),
        });
    }
    if let Some(encoding) = content_encoding(response.headers()) {
        return Err(SourceError::Encoded {
            url: url.to_string(),
            encoding,
        });
    }
    Ok(())
}

/// A reqwest error with its causes, which hold the useful part (refused, DNS…).
pub(crate) fn describe(e: &reqwest::Error) -> String {
    let mut out = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    if e.is_timeout() {
        out.push_str(" (timed out)");
    }
    out
}
