//! A headless Chromium driven over the DevTools protocol (a websocket of
//! JSON commands), for `grove-bench web` and the web pages' tests (which
//! include this file): Debian's `chromium` package, `--headless=new`,
//! `--remote-debugging-port=0` (the port is read from `DevToolsActivePort`),
//! `--no-sandbox` as root. The websocket client is this file's own, the
//! little the protocol needs: one connection to a local browser, text
//! frames, no extensions.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

/// The browser binary: `GROVE_CHROMIUM`, else `chromium` on PATH.
pub fn chromium_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GROVE_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("chromium"))
            .find(|p| p.is_file())
    })
}

/// A running headless browser and one page of it.
pub struct Browser {
    child: Child,
    profile: tempfile::TempDir,
    page: Socket,
    next_id: u64,
    /// Events received while waiting for answers, oldest first.
    pub events: Vec<Value>,
}

impl Browser {
    /// Starts the browser with a fresh profile, `width`×`height` window.
    pub fn launch(binary: &Path, width: u32, height: u32) -> anyhow::Result<Browser> {
        let profile = tempfile::tempdir()?;
        let mut cmd = Command::new(binary);
        cmd.args([
            "--headless=new",
            "--remote-debugging-port=0",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-gpu",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--mute-audio",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--window-size={width},{height}"))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            // Chromium's sandbox refuses to run as root.
            cmd.arg("--no-sandbox");
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let mut browser_guard = Guard(Some(child));
        let port_file = profile.path().join("DevToolsActivePort");
        let deadline = Instant::now() + Duration::from_secs(60);
        let port: u16 = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file)
                && let Some(port) = text.lines().next().and_then(|l| l.trim().parse().ok())
            {
                break port;
            }
            if Instant::now() > deadline {
                bail!("chromium wrote no DevToolsActivePort within 60 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        // The page target (about:blank) from the HTTP endpoint's list.
        let page_url = loop {
            let list = http_get(port, "/json/list").unwrap_or_default();
            let targets: Value = serde_json::from_str(&list).unwrap_or(Value::Null);
            if let Some(url) = targets.as_array().and_then(|a| {
                a.iter()
                    .find(|t| t["type"] == "page")
                    .and_then(|t| t["webSocketDebuggerUrl"].as_str())
                    .map(str::to_string)
            }) {
                break url;
            }
            if Instant::now() > deadline {
                bail!("chromium listed no page target within 60 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let path = page_url
            .split_once("127.0.0.1:")
            .and_then(|(_, rest)| rest.split_once('/'))
            .map(|(_, p)| format!("/{p}"))
            .context("the page's websocket URL")?;
        let page = Socket::connect(port, &path)?;
        let mut browser = Browser {
            child: browser_guard.0.take().context("browser")?,
            profile,
            page,
            next_id: 0,
            events: Vec::new(),
        };
        browser.call("Page.enable", json!({}))?;
        browser.call("Runtime.enable", json!({}))?;
        Ok(browser)
    }

    /// Sends a command and waits (60 s at most) for its answer.
    pub fn call(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        let message = json!({"id": id, "method": method, "params": params});
        self.page.send(&message.to_string())?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if Instant::now() > deadline {
                bail!("{method}: no answer within 60 s");
            }
            let text = self.page.receive()?;
            let value: Value = serde_json::from_str(&text)?;
            if value["id"] == id {
                if let Some(e) = value.get("error") {
                    bail!("{method}: {e}");
                }
                return Ok(value["result"].clone());
            }
            if value.get("method").is_some() {
                self.events.push(value);
            }
        }
    }

    /// Loads `url` and waits for its load event.
    pub fn navigate(&mut self, url: &str) -> anyhow::Result<()> {
        self.events.clear();
        let answer = self.call("Page.navigate", json!({"url": url}))?;
        if let Some(e) = answer["errorText"].as_str() {
            bail!("navigating to {url}: {e}");
        }
        self.wait_event("Page.loadEventFired", Duration::from_secs(60))
            .map(|_| ())
    }

    /// Waits for an event named `method` (already received or to come).
    pub fn wait_event(&mut self, method: &str, within: Duration) -> anyhow::Result<Value> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(i) = self.events.iter().position(|e| e["method"] == method) {
                return Ok(self.events.remove(i));
            }
            if Instant::now() > deadline {
                bail!("no {method} within {within:?}");
            }
            // A cheap command: its answer carries any events before it.
            self.call("Runtime.evaluate", json!({"expression": "0"}))?;
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The value of a JavaScript expression (promises awaited).
    pub fn eval(&mut self, expression: &str) -> anyhow::Result<Value> {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        )?;
        if let Some(e) = r.get("exceptionDetails") {
            bail!("{expression}: {e}");
        }
        Ok(r["result"]["value"].clone())
    }

    /// Waits until `condition` (a JavaScript expression) is true.
    pub fn wait_for(&mut self, condition: &str, within: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + within;
        loop {
            if self.eval(condition)? == Value::Bool(true) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("still false after {within:?}: {condition}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sets the files of the `<input type=file>` that `selector` finds.
    pub fn set_file(&mut self, selector: &str, file: &Path) -> anyhow::Result<()> {
        let doc = self.call("DOM.getDocument", json!({}))?;
        let root = doc["root"]["nodeId"].clone();
        let found = self.call(
            "DOM.querySelector",
            json!({"nodeId": root, "selector": selector}),
        )?;
        let node = found["nodeId"].clone();
        if node == 0 {
            bail!("no element {selector}");
        }
        self.call(
            "DOM.setFileInputFiles",
            json!({"nodeId": node, "files": [file.display().to_string()]}),
        )?;
        Ok(())
    }

    /// A PNG of the page as the viewport shows it (`full`: the whole page).
    pub fn screenshot(&mut self, file: &Path, full: bool) -> anyhow::Result<()> {
        let shot = self.call(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": full}),
        )?;
        let data = shot["data"].as_str().context("screenshot data")?;
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(file, base64_decode(data).context("screenshot base64")?)?;
        Ok(())
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = &self.profile;
    }
}

/// Kills the browser when launching fails half way.
struct Guard(Option<Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A plain GET to the browser's HTTP endpoint (it keeps the connection
/// open, so the body is read by its Content-Length).
fn http_get(port: u16, path: &str) -> anyhow::Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: */*\r\n\r\n"
    )?;
    let mut reader = BufReader::new(s);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse()?;
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    Ok(String::from_utf8(body)?)
}

/// A client websocket (RFC 6455): masked text frames out, frames in.
struct Socket {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Socket {
    fn connect(port: u16, path: &str) -> anyhow::Result<Socket> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(Duration::from_secs(90)))?;
        stream.set_nodelay(true)?;
        let key = base64_encode(&rand::random::<[u8; 16]>());
        let mut writer = stream.try_clone()?;
        write!(
            writer,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )?;
        let mut reader = BufReader::new(stream);
        let mut status = String::new();
        reader.read_line(&mut status)?;
        if !status.contains(" 101 ") {
            bail!("websocket handshake: {}", status.trim());
        }
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
                break;
            }
        }
        Ok(Socket { reader, writer })
    }

    fn send(&mut self, text: &str) -> anyhow::Result<()> {
        let payload = text.as_bytes();
        let mut frame = vec![0x81u8];
        match payload.len() {
            n if n < 126 => frame.push(0x80 | n as u8),
            n if n <= 0xFFFF => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        let mask = rand::random::<[u8; 4]>();
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.writer.write_all(&frame)?;
        Ok(())
    }

    /// The next whole text message (continuations joined; pings answered).
    fn receive(&mut self) -> anyhow::Result<String> {
        let mut message = Vec::new();
        loop {
            let mut head = [0u8; 2];
            self.reader.read_exact(&mut head)?;
            let fin = head[0] & 0x80 != 0;
            let opcode = head[0] & 0x0F;
            let masked = head[1] & 0x80 != 0;
            let mut len = u64::from(head[1] & 0x7F);
            if len == 126 {
                let mut b = [0u8; 2];
                self.reader.read_exact(&mut b)?;
                len = u64::from(u16::from_be_bytes(b));
            } else if len == 127 {
                let mut b = [0u8; 8];
                self.reader.read_exact(&mut b)?;
                len = u64::from_be_bytes(b);
            }
            let mut mask = [0u8; 4];
            if masked {
                self.reader.read_exact(&mut mask)?;
            }
            let mut payload = vec![0u8; usize::try_from(len)?];
            self.reader.read_exact(&mut payload)?;
            if masked {
                for (i, b) in payload.iter_mut().enumerate() {
                    *b ^= mask[i % 4];
                }
            }
            match opcode {
                0x8 => bail!("the browser closed the DevTools connection"),
                0x9 => {
                    // Ping: answer with a pong of the same payload.
                    let mut pong = vec![0x8Au8, 0x80 | payload.len() as u8];
                    pong.extend_from_slice(&[0, 0, 0, 0]);
                    pong.extend_from_slice(&payload);
                    self.writer.write_all(&pong)?;
                }
                0xA => {}
                _ => {
                    message.extend_from_slice(&payload);
                    if fin {
                        return Ok(String::from_utf8(message)?);
                    }
                }
            }
        }
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.len();
        let v = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= n {
                out.push(B64[(v >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
    {
        let v = B64.iter().position(|b| *b == c)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}
