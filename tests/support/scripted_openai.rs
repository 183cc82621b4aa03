//! A scripted OpenAI-compatible chat-completions server for tests: real HTTP
//! on 127.0.0.1, answers chosen by a script or a closure, every request
//! recorded. Used by the model backend tests and by whole-moot tests.
//!
//! Its answers report honest counts as `usage`: a "token" is a word
//! (whitespace-separated) of the prompt's messages and of the answer; and
//! llama.cpp-style `timings`: the milliseconds it took to read the request
//! and to make the answer (the script's own time, any delay included).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// 200 with a chat completion whose content is this text.
    Text(String),
    /// 200 with `"content": null`.
    NullContent,
    /// Any status with this body (JSON or not).
    Status(u16, String),
    /// A status with a `Retry-After` header (seconds).
    StatusRetryAfter(u16, u64, String),
    /// Wait, then answer.
    Delay(Duration, Box<Reply>),
    /// Close the connection without answering.
    Close,
}

impl Reply {
    pub fn text(text: &str) -> Reply {
        Reply::Text(text.to_string())
    }

    /// An OpenAI-style error body with this message.
    pub fn error(status: u16, message: &str) -> Reply {
        Reply::Status(
            status,
            serde_json::json!({"error": {"message": message, "type": "test_error"}}).to_string(),
        )
    }
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: serde_json::Value,
    /// The `usage` the answer reported (prompt words, answer words); `None`
    /// for an answer without a completion (an error, a closed connection).
    pub reported: Option<(u64, u64)>,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The words of passage `[s1]`'s first line in the prompt (a
    /// speaker's turn); `None` for a prompt without passages (the
    /// narrator's summary).
    pub fn first_passage(&self) -> Option<Vec<String>> {
        self.body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|m| grove::moot::prompt::passage_first_line(m["content"].as_str()?, "s1"))
            .map(|line| line.split_whitespace().map(str::to_string).collect())
    }

    /// Words in the messages' contents: the prompt tokens the answer
    /// reports.
    pub fn prompt_words(&self) -> u64 {
        self.body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["content"].as_str())
            .map(|c| c.split_whitespace().count() as u64)
            .sum()
    }

    /// The `content` of the last message (the prompt's newest part).
    pub fn last_message(&self) -> String {
        self.body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_string()
    }
}

type Responder = Box<dyn FnMut(&RecordedRequest) -> Reply + Send>;

/// The running server; stops when dropped.
pub struct ScriptedServer {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<RecordedRequest>>>,
    stop: Arc<AtomicBool>,
    accept_thread: Option<JoinHandle<()>>,
}

impl ScriptedServer {
    /// Answers requests with `script` in order; after it, a 500 saying so.
    pub fn start(script: Vec<Reply>) -> ScriptedServer {
        let mut script: VecDeque<Reply> = script.into();
        ScriptedServer::start_with(move |_| {
            script
                .pop_front()
                .unwrap_or_else(|| Reply::error(500, "scripted server: script exhausted"))
        })
    }

    /// Answers each request with whatever `responder` returns for it.
    pub fn start_with(
        responder: impl FnMut(&RecordedRequest) -> Reply + Send + 'static,
    ) -> ScriptedServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let responder: Arc<Mutex<Responder>> = Arc::new(Mutex::new(Box::new(responder)));
        let accept_thread = {
            let requests = Arc::clone(&requests);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let requests = Arc::clone(&requests);
                    let responder = Arc::clone(&responder);
                    // One thread per connection, so a delayed answer does not
                    // hold up the next request.
                    std::thread::spawn(move || serve(stream, &requests, &responder));
                }
            })
        };
        ScriptedServer {
            addr,
            requests,
            stop,
            accept_thread: Some(accept_thread),
        }
    }

    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The prompt and answer tokens the answers so far reported, summed.
    pub fn reported_tokens(&self) -> (u64, u64) {
        self.requests()
            .iter()
            .filter_map(|r| r.reported)
            .fold((0, 0), |(p, g), (rp, rg)| (p + rp, g + rg))
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(thread) = self.accept_thread.take() {
            let _ = thread.join();
        }
    }
}

/// Serves one connection: reads one request, answers, closes.
fn serve(stream: TcpStream, requests: &Mutex<Vec<RecordedRequest>>, responder: &Mutex<Responder>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let reading = Instant::now();
    let Some(mut request) = read_request(BufReader::new(stream)) else {
        return;
    };
    let read = reading.elapsed();
    let answering = Instant::now();
    let reply = match responder.lock() {
        Ok(mut responder) => responder(&request),
        Err(_) => Reply::error(500, "scripted server: responder panicked"),
    };
    let prompt_words = request.prompt_words();
    request.reported = answer_words(&reply).map(|words| (prompt_words, words));
    if let Ok(mut recorded) = requests.lock() {
        recorded.push(request);
    }
    let answer = Answer {
        prompt_words,
        read,
        answering,
    };
    write_reply(write_half, reply, &answer);
}

/// What a completion reports besides its text.
struct Answer {
    prompt_words: u64,
    /// Time reading the request.
    read: Duration,
    /// When the script started on the answer.
    answering: Instant,
}

/// Words of the completion `reply` answers with, if it is one.
fn answer_words(reply: &Reply) -> Option<u64> {
    match reply {
        Reply::Text(text) => Some(text.split_whitespace().count() as u64),
        Reply::NullContent => Some(0),
        Reply::Delay(_, inner) => answer_words(inner),
        _ => None,
    }
}

fn read_request(mut reader: BufReader<TcpStream>) -> Option<RecordedRequest> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        let name = name.trim().to_lowercase();
        let value = value.trim().to_string();
        if name == "content-length" {
            length = value.parse().ok()?;
        }
        headers.push((name, value));
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).ok()?;
    let body = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    Some(RecordedRequest {
        method,
        path,
        headers,
        body,
        reported: None,
    })
}

fn write_reply(mut stream: TcpStream, reply: Reply, answer: &Answer) {
    let (status, body, extra) = match reply {
        Reply::Delay(wait, inner) => {
            std::thread::sleep(wait);
            return write_reply(stream, *inner, answer);
        }
        Reply::Close => {
            let _ = stream.shutdown(std::net::Shutdown::Both);
            return;
        }
        Reply::Text(text) => {
            let words = text.split_whitespace().count() as u64;
            let content = serde_json::Value::String(text);
            (200, completion(content, words, answer), String::new())
        }
        Reply::NullContent => (
            200,
            completion(serde_json::Value::Null, 0, answer),
            String::new(),
        ),
        Reply::Status(status, body) => (status, body, String::new()),
        Reply::StatusRetryAfter(status, secs, body) => {
            (status, body, format!("Retry-After: {secs}\r\n"))
        }
    };
    let head = format!(
        "HTTP/1.1 {status} Scripted\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
    let _ = stream.flush();
}

fn completion(content: serde_json::Value, words: u64, answer: &Answer) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let prompt = answer.prompt_words;
    serde_json::json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "model": "scripted",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": prompt, "completion_tokens": words, "total_tokens": prompt + words},
        "timings": {
            "prompt_n": prompt,
            "prompt_ms": ms(answer.read),
            "predicted_n": words,
            "predicted_ms": ms(answer.answering.elapsed()),
        }
    })
    .to_string()
}
