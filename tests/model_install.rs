//! `grove model install --hub` and `--gguf` against a local stand-in for the
//! Hugging Face hub (its URL layout, a relative redirect for a renamed
//! repository, the 302 to a CDN path, `Range` requests, the sha256 in
//! `X-Linked-Etag`, the tree API), with a tiny valid llama GGUF (`support::gguf`).

use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use crate::support::Grove;

const REPO: &str = "grove-test/Tiny-Instruct-GGUF";
const FILE: &str = "tiny-instruct-f32.gguf";
const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A request the stand-in saw.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    range: Option<String>,
}

/// How the stand-in serves the file.
#[derive(Clone)]
struct Served {
    bytes: Vec<u8>,
    /// The sha256 it announces (the file's own, or a wrong one).
    announced_sha256: String,
    /// An LFS file (sha256 in `X-Linked-Etag`, 302 to the CDN path), or a
    /// git-stored one (a git sha1 `ETag`, the bytes at the resolve URL, the
    /// sha256 only in the tree API's `lfs.oid`, when `tree_lfs`).
    lfs: bool,
    tree_lfs: bool,
    /// The first download stops after this many bytes (connection closed).
    drop_first_after: Option<usize>,
    /// The first download is answered 503 (a CDN having a bad moment).
    refuse_first: bool,
}

struct HubStandIn {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl HubStandIn {
    fn start(served: Served) -> HubStandIn {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let base = url.clone();
        std::thread::spawn(move || {
            let mut downloads = 0usize;
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(10)));
                // One request per connection (Connection: close).
                let _ = answer(stream, &served, &base, &log, &mut downloads);
            }
        });
        HubStandIn { url, seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("log").clone()
    }
}

fn answer(
    stream: TcpStream,
    served: &Served,
    base: &str,
    log: &Mutex<Vec<Seen>>,
    downloads: &mut usize,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let mut range = None;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header == "\r\n" {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("range")
        {
            range = Some(value.trim().to_string());
        }
    }
    log.lock().expect("log").push(Seen {
        method: method.clone(),
        path: path.clone(),
        range: range.clone(),
    });
    let mut out = stream;
    let head = method == "HEAD";
    let size = served.bytes.len();
    let sha = sha256_hex(&served.bytes);
    let resolve = format!("/{REPO}/resolve/main/{FILE}");
    let renamed = format!("/grove-test/Old-Name-GGUF/resolve/main/{FILE}");
    let cdn = format!("/cdn/{sha}");
    let tree = format!("/api/models/{REPO}/tree/main");
    if path == renamed {
        return respond(
            &mut out,
            "307 Temporary Redirect",
            &[("Location", resolve)],
            b"",
            head,
        );
    }
    if path == resolve && served.lfs {
        let headers = [
            ("Location", format!("{base}{cdn}")),
            ("X-Linked-Etag", format!("\"{}\"", served.announced_sha256)),
            ("X-Linked-Size", size.to_string()),
            ("X-Repo-Commit", COMMIT.to_string()),
            ("ETag", "\"the-pointer-file-etag\"".to_string()),
        ];
        return respond(&mut out, "302 Found", &headers, b"", head);
    }
    if (path == resolve && !served.lfs) || path == cdn {
        let mut headers = vec![
            ("X-Repo-Commit", COMMIT.to_string()),
            ("Accept-Ranges", "bytes".to_string()),
        ];
        if !served.lfs {
            headers.push((
                "ETag",
                "\"b1797ada900fbcebfe7388cefbf28e8e5b0cfe21\"".into(),
            ));
        }
        if head {
            headers.push(("Content-Length", size.to_string()));
            return write_head(&mut out, "200 OK", &headers, size);
        }
        *downloads += 1;
        if served.refuse_first && *downloads == 1 {
            return respond(
                &mut out,
                "503 Service Unavailable",
                &headers,
                b"busy",
                false,
            );
        }
        let start = range
            .as_deref()
            .and_then(|r| r.strip_prefix("bytes="))
            .and_then(|r| r.strip_suffix('-'))
            .and_then(|n| n.parse::<usize>().ok());
        if let Some(start) = start {
            if start >= size {
                headers.push(("Content-Range", format!("bytes */{size}")));
                return respond(&mut out, "416 Range Not Satisfiable", &headers, b"", false);
            }
            headers.push((
                "Content-Range",
                format!("bytes {start}-{}/{size}", size - 1),
            ));
            return respond(
                &mut out,
                "206 Partial Content",
                &headers,
                &served.bytes[start..],
                false,
            );
        }
        if let (Some(cut), 1) = (served.drop_first_after, *downloads) {
            // Announce the whole file, send part of it, hang up.
            write_head(&mut out, "200 OK", &headers, size)?;
            out.write_all(&served.bytes[..cut])?;
            out.flush()?;
            return out.shutdown(Shutdown::Both);
        }
        return respond(&mut out, "200 OK", &headers, &served.bytes, false);
    }
    if path == tree && !head {
        let mut entry = serde_json::json!({
            "type": "file",
            "oid": "b1797ada900fbcebfe7388cefbf28e8e5b0cfe21",
            "size": size,
            "path": FILE,
        });
        if served.tree_lfs {
            entry["lfs"] = serde_json::json!({"oid": served.announced_sha256, "size": size, "pointerSize": 134});
        }
        let body = serde_json::json!([{"type": "file", "oid": "x", "size": 10, "path": "README.md"}, entry]);
        return respond(
            &mut out,
            "200 OK",
            &[("Content-Type", "application/json".into())],
            body.to_string().as_bytes(),
            false,
        );
    }
    respond(
        &mut out,
        "404 Not Found",
        &[
            ("X-Error-Code", "EntryNotFound".into()),
            ("X-Error-Message", "Entry not found".into()),
        ],
        b"Entry not found",
        head,
    )
}

fn write_head(
    out: &mut TcpStream,
    status: &str,
    headers: &[(&str, String)],
    length: usize,
) -> std::io::Result<()> {
    let mut text = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
    for (name, value) in headers {
        if !name.eq_ignore_ascii_case("content-length") {
            text.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    text.push_str(&format!("Content-Length: {length}\r\n\r\n"));
    out.write_all(text.as_bytes())
}

fn respond(
    out: &mut TcpStream,
    status: &str,
    headers: &[(&str, String)],
    body: &[u8],
    head: bool,
) -> std::io::Result<()> {
    write_head(out, status, headers, body.len())?;
    if !head {
        out.write_all(body)?;
    }
    out.flush()?;
    out.shutdown(Shutdown::Write)
}

fn served(bytes: Vec<u8>) -> Served {
    Served {
        announced_sha256: sha256_hex(&bytes),
        bytes,
        lfs: true,
        tree_lfs: true,
        drop_first_after: None,
        refuse_first: false,
    }
}

/// `grove model install --hub REPO --file FILE` against the stand-in.
fn hub_install(
    grove: &Grove,
    hub: &HubStandIn,
    repo: &str,
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec!["model", "install", "--hub", repo, "--file", FILE];
    args.extend_from_slice(extra);
    grove
        .cmd(&args)
        .env("GROVE_MODEL__HUB_URL", &hub.url)
        .output()
        .expect("run grove")
}

fn models(grove: &Grove) -> PathBuf {
    grove.state().join("models")
}

/// The files in the model directory (none when it does not exist).
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "grove failed: {}", stderr(out));
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

#[test]
fn hub_install_follows_the_redirects_checks_the_sha256_and_runs() {
    let bytes = crate::support::gguf::tiny_model("llama");
    let hub = HubStandIn::start(served(bytes.clone()));
    let grove = Grove::new();
    // The old name answers a relative redirect, as a renamed repository does.
    let report = json(&hub_install(
        &grove,
        &hub,
        "grove-test/Old-Name-GGUF",
        &["--json"],
    ));
    let installed = models(&grove).join(FILE);
    assert_eq!(report["model_file"], installed.display().to_string());
    assert_eq!(report["downloaded"], true);
    assert_eq!(report["already_installed"], false);
    assert_eq!(report["resumed_from"], 0);
    assert_eq!(report["sha256"], sha256_hex(&bytes));
    assert_eq!(report["commit"], COMMIT);
    assert_eq!(report["model_name"], "tiny-test");
    assert!(
        crate::docs::documented_shapes().contains(&crate::docs::shape_of(&report)),
        "docs/cli-json.md has no example shaped like {report}"
    );
    assert_eq!(std::fs::read(&installed).expect("installed"), bytes);
    assert_eq!(
        listing(&models(&grove)),
        vec![FILE.to_string()],
        "no partial file left"
    );
    let seen = hub.seen();
    let methods: Vec<(&str, &str)> = seen
        .iter()
        .map(|s| (s.method.as_str(), s.path.as_str()))
        .collect();
    assert_eq!(
        methods,
        vec![
            (
                "HEAD",
                format!("/grove-test/Old-Name-GGUF/resolve/main/{FILE}").as_str()
            ),
            ("HEAD", format!("/{REPO}/resolve/main/{FILE}").as_str()),
            ("GET", format!("/cdn/{}", sha256_hex(&bytes)).as_str()),
        ]
    );
    assert!(seen.iter().all(|s| s.range.is_none()));

    // Again: the file is there with the right sha256, nothing is fetched.
    let again = json(&hub_install(&grove, &hub, REPO, &["--json"]));
    assert_eq!(again["already_installed"], true);
    assert_eq!(hub.seen().iter().filter(|s| s.method == "GET").count(), 1);

    // The embedded engine runs what was installed.
    let out = grove
        .cmd(&[
            "model",
            "chat",
            "hi",
            "--max-tokens",
            "4",
            "--temperature",
            "0",
            "--json",
        ])
        .env("GROVE_MODEL__PATH", FILE)
        .output()
        .expect("chat");
    let reply = json(&out);
    assert_eq!(reply["model"], "embedded:tiny-instruct-f32");
}

#[test]
fn hub_download_resumes_with_a_range_request_after_a_dropped_connection() {
    let bytes = crate::support::gguf::tiny_model("llama");
    let half = bytes.len() / 2;
    let hub = HubStandIn::start(Served {
        drop_first_after: Some(half),
        ..served(bytes.clone())
    });
    let grove = Grove::new();
    let first = hub_install(&grove, &hub, REPO, &[]);
    assert!(!first.status.success());
    let err = stderr(&first);
    assert!(
        err.contains("run the same install again to resume"),
        "{err}"
    );
    let names = listing(&models(&grove));
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(
        names[0].starts_with(FILE) && names[0].ends_with(".partial"),
        "{names:?}"
    );
    let partial = models(&grove).join(&names[0]);
    assert_eq!(std::fs::read(&partial).expect("partial"), &bytes[..half]);

    let second = json(&hub_install(&grove, &hub, REPO, &["--json"]));
    assert_eq!(second["resumed_from"], half as u64);
    assert_eq!(second["downloaded"], true);
    assert_eq!(
        std::fs::read(models(&grove).join(FILE)).expect("installed"),
        bytes
    );
    assert_eq!(listing(&models(&grove)), vec![FILE.to_string()]);
    let ranges: Vec<Option<String>> = hub
        .seen()
        .into_iter()
        .filter(|s| s.method == "GET")
        .map(|s| s.range)
        .collect();
    assert_eq!(ranges, vec![None, Some(format!("bytes={half}-"))]);
}

#[test]
fn hub_download_refused_by_the_cdn_leaves_no_file() {
    let bytes = crate::support::gguf::tiny_model("llama");
    let hub = HubStandIn::start(Served {
        refuse_first: true,
        ..served(bytes.clone())
    });
    let grove = Grove::new();
    let out = hub_install(&grove, &hub, REPO, &[]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("HTTP 503"), "{}", stderr(&out));
    assert_eq!(
        listing(&models(&grove)),
        Vec::<String>::new(),
        "no empty partial file"
    );
    let report = json(&hub_install(&grove, &hub, REPO, &["--json"]));
    assert_eq!(report["resumed_from"], 0);
    assert_eq!(
        std::fs::read(models(&grove).join(FILE)).expect("installed"),
        bytes
    );
}

#[test]
fn hub_bad_checksum_is_refused_and_nothing_is_installed() {
    let bytes = crate::support::gguf::tiny_model("llama");
    let hub = HubStandIn::start(Served {
        announced_sha256: sha256_hex(b"some other file"),
        ..served(bytes)
    });
    let grove = Grove::new();
    let out = hub_install(&grove, &hub, REPO, &[]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("sha256") && err.contains("nothing was installed"),
        "{err}"
    );
    assert_eq!(
        listing(&models(&grove)),
        Vec::<String>::new(),
        "nothing left behind"
    );

    // A --sha256 that is not the hub's is refused before any download.
    let downloads = hub.seen().iter().filter(|s| s.method == "GET").count();
    let wrong = "0".repeat(64);
    let out = hub_install(&grove, &hub, REPO, &["--sha256", &wrong]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("nothing was downloaded"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        hub.seen().iter().filter(|s| s.method == "GET").count(),
        downloads
    );

    // A file the repository does not have: the hub's own error, named.
    let out = grove
        .cmd(&["model", "install", "--hub", REPO, "--file", "missing.gguf"])
        .env("GROVE_MODEL__HUB_URL", &hub.url)
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no file missing.gguf in"),
        "{}",
        stderr(&out)
    );
    assert_eq!(listing(&models(&grove)), Vec::<String>::new());
}

#[test]
fn hub_file_without_an_lfs_etag_takes_its_sha256_from_the_tree_api() {
    let bytes = crate::support::gguf::tiny_model("llama");
    let hub = HubStandIn::start(Served {
        lfs: false,
        ..served(bytes.clone())
    });
    let grove = Grove::new();
    let report = json(&hub_install(&grove, &hub, REPO, &["--json"]));
    assert_eq!(report["sha256"], sha256_hex(&bytes));
    assert!(
        hub.seen()
            .iter()
            .any(|s| s.method == "GET" && s.path == format!("/api/models/{REPO}/tree/main"))
    );

    // No sha256 anywhere: refused unless given.
    let hub = HubStandIn::start(Served {
        lfs: false,
        tree_lfs: false,
        ..served(bytes.clone())
    });
    let grove = Grove::new();
    let out = hub_install(&grove, &hub, REPO, &[]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("pass --sha256"), "{}", stderr(&out));
    let given = sha256_hex(&bytes);
    let report = json(&hub_install(
        &grove,
        &hub,
        REPO,
        &["--sha256", &given, "--json"],
    ));
    assert_eq!(report["sha256"], given);
}

#[test]
fn local_gguf_installs_and_a_wrong_sha256_is_refused() {
    let bytes = crate::support::gguf::tiny_model("llama");
    let grove = Grove::new();
    let source = grove.write("mine.gguf", &bytes);
    let source_arg = source.display().to_string();
    let out = grove
        .cmd(&[
            "model",
            "install",
            "--gguf",
            &source_arg,
            "--sha256",
            &"1".repeat(64),
        ])
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("not the 1111"), "{}", stderr(&out));
    assert_eq!(listing(&models(&grove)), Vec::<String>::new());

    let report = grove.json(&[
        "model",
        "install",
        "--gguf",
        &source_arg,
        "--sha256",
        &sha256_hex(&bytes).to_uppercase(),
    ]);
    assert_eq!(report["downloaded"], false);
    assert_eq!(report["sha256"], sha256_hex(&bytes));
    assert_eq!(
        std::fs::read(models(&grove).join("mine.gguf")).expect("installed"),
        bytes
    );
    assert_eq!(listing(&models(&grove)), vec!["mine.gguf".to_string()]);
    let again = grove.json(&["model", "install", "--gguf", &source_arg]);
    assert_eq!(again["already_installed"], true);
}

#[test]
fn non_gguf_and_unsupported_models_are_refused_at_install() {
    let grove = Grove::new();
    let text = grove.write("notes.gguf", b"these are notes, not a model\n");
    let err = grove.fails(&["model", "install", "--gguf", &text.display().to_string()]);
    assert!(err.contains("is not a GGUF file"), "{err}");
    // An architecture llama.cpp does not know.
    let odd = grove.write("odd.gguf", &crate::support::gguf::tiny_model("mystery9"));
    let err = grove.fails(&["model", "install", "--gguf", &odd.display().to_string()]);
    assert!(
        err.contains("llama.cpp does not load it") && err.contains("`mystery9`"),
        "{err}"
    );
    // A truncated file: its header promises more than it holds.
    let whole = crate::support::gguf::tiny_model("llama");
    let cut = grove.write("cut.gguf", &whole[..whole.len() / 2]);
    let err = grove.fails(&["model", "install", "--gguf", &cut.display().to_string()]);
    assert!(err.contains("cut.gguf"), "{err}");
    assert_eq!(listing(&models(&grove)), Vec::<String>::new());
    let err = grove.fails(&["model", "install", "--hub", "no-slash", "--file", FILE]);
    assert!(err.contains("is not `owner/name`"), "{err}");
}

#[test]
fn a_model_too_large_for_memory_is_refused_before_loading() {
    let grove = Grove::new();
    // A valid header in a sparse file of 1 TiB: no machine here holds it.
    let big = grove.write("huge.gguf", &crate::support::gguf::tiny_model("llama"));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&big)
        .expect("open");
    file.set_len(1 << 40).expect("sparse file");
    drop(file);
    let err = grove.fails(&["model", "install", "--gguf", &big.display().to_string()]);
    assert!(err.contains("more than this machine's"), "{err}");
    assert_eq!(listing(&models(&grove)), Vec::<String>::new());

    // Put there by hand, it is refused at load with a clear error, not an abort.
    std::fs::create_dir_all(models(&grove)).expect("models dir");
    std::fs::rename(&big, models(&grove).join("huge.gguf")).expect("move");
    let out = grove
        .cmd(&["model", "chat", "hi", "--max-tokens", "4"])
        .env("GROVE_MODEL__PATH", "huge.gguf")
        .output()
        .expect("chat");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("too large") && err.contains("available"),
        "{err}"
    );
}
