//! The web pages of the HTTP listener: the overview `/`, the live moot
//! page `/moots/ID` (with its turn and state fragments), `/verify`, the
//! ask pages `/asks` and `/asks/ROOT` (with the record as JSON), and
//! their CSS and JavaScript, all inside the binary (no CDN, no build
//! step). Mounted through the one route table (its parent, `control::routes`); pages
//! are server-rendered HTML, and everything from books, names or peers is
//! escaped ([`html::esc`]).

mod ask;
mod html;
mod mark;
mod moot;
mod overview;
mod panel;
mod verify;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{MethodRouter, get};
use serde::Deserialize;

use super::{ControlState, Query};
use crate::api::{ApiError, dto};

/// The pages' CSP: their own styles, scripts and fetches, nothing else.
const PAGE_CSP: &str = "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; \
     img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// The web routes, for the one route table.
pub fn routes() -> Vec<(&'static str, MethodRouter<ControlState>)> {
    vec![
        ("/", get(overview)),
        ("/moots", axum::routing::post(start)),
        ("/moots/{id}", get(moot_page)),
        ("/moots/{id}/turns/{index}", get(moot_turn)),
        ("/moots/{id}/state", get(moot_state)),
        ("/verify", get(verify_page).post(verify_file)),
        ("/asks", get(asks_page).post(ask_form)),
        ("/asks/{root}", get(answer_page)),
        ("/asks/{root}/record", get(answer_record)),
        (
            "/web/style.css",
            get(|| asset(include_str!("assets/style.css"), "text/css")),
        ),
        (
            "/web/moot.js",
            get(|| asset(include_str!("assets/moot.js"), JS)),
        ),
        (
            "/web/verify.js",
            get(|| asset(include_str!("assets/verify.js"), JS)),
        ),
    ]
}

const JS: &str = "text/javascript";

async fn asset(text: &'static str, kind: &'static str) -> Response {
    let mut r = (
        [(header::CONTENT_TYPE, HeaderValue::from_static(kind))],
        text,
    )
        .into_response();
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=300"),
    );
    r
}

/// An HTML answer with the pages' CSP.
fn html(status: StatusCode, body: String) -> Response {
    let mut r = (status, body).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(PAGE_CSP),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn error_page(e: ApiError) -> Response {
    let status = StatusCode::from_u16(e.kind.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = format!(
        "<h1>{}</h1><p>{}</p><p><a href=\"/\">Back to the overview</a></p>",
        status.as_u16(),
        html::esc(&e.message)
    );
    html(status, html::page("Error", &body, &[]))
}

async fn overview(State(state): State<ControlState>) -> Response {
    let mesh = super::mesh_status(&state.mesh).await.map_err(|e| e.message);
    let roots = super::roots(&state.node).await;
    let view = overview::Overview {
        info: (*state.info).clone(),
        mesh,
        roots,
        moots: state.moots.book.list(),
    };
    html(StatusCode::OK, overview::render(&view))
}

/// Renders with the hosted moot `id` and the current roster.
fn with_moot(
    state: &ControlState,
    id: &str,
    f: impl FnOnce(
        &moot::MootPage<'_>,
        Option<&crate::mesh::roster::Roster>,
    ) -> Result<String, ApiError>,
) -> Response {
    let hosted = match state.moots.book.get(id) {
        Ok(m) => m,
        Err(e) => return error_page(e),
    };
    let view = state.node.mesh.view();
    let roster = view.roster();
    let page = moot::MootPage::new(&hosted, roster);
    match f(&page, roster) {
        Ok(body) => html(StatusCode::OK, body),
        Err(e) => error_page(e),
    }
}

/// The pages of finished moots, rendered once: a finished moot no longer
/// changes, so its page changes only with the roster (names, the check of
/// announcements). Keyed by moot id; a few are kept.
static FINISHED_PAGES: std::sync::Mutex<Vec<KeptPage>> = std::sync::Mutex::new(Vec::new());

/// A kept page: the moot id, the roster hash it was drawn with, its HTML.
type KeptPage = (String, [u8; 32], std::sync::Arc<String>);

/// Finished pages kept.
const FINISHED_PAGES_KEPT: usize = 16;

async fn moot_page(State(state): State<ControlState>, Path(id): Path<String>) -> Response {
    let finished = state
        .moots
        .book
        .get(&id)
        .is_ok_and(|m| m.view.state == crate::daemon::moots::book::MootState::Finished);
    let roster_hash = state
        .node
        .mesh
        .view()
        .roster()
        .map(|r| r.hash())
        .unwrap_or_default();
    if finished {
        let kept = FINISHED_PAGES.lock().ok().and_then(|pages| {
            pages
                .iter()
                .find(|(i, h, _)| *i == id && *h == roster_hash)
                .map(|(_, _, html)| html.clone())
        });
        if let Some(html) = kept {
            return self::html(StatusCode::OK, (*html).clone());
        }
    }
    with_moot(&state, &id, |page, roster| {
        let html = moot::page_html(page, roster);
        if finished && let Ok(mut pages) = FINISHED_PAGES.lock() {
            pages.retain(|(i, _, _)| *i != id);
            if pages.len() >= FINISHED_PAGES_KEPT {
                pages.remove(0);
            }
            pages.push((id.clone(), roster_hash, std::sync::Arc::new(html.clone())));
        }
        Ok(html)
    })
}

async fn moot_turn(
    State(state): State<ControlState>,
    Path((id, index)): Path<(String, usize)>,
) -> Response {
    with_moot(&state, &id, |page, _| {
        if index >= page.turns.len() {
            return Err(ApiError::not_found(format!(
                "moot {id} has {} turns; no turn {index} (0-based)",
                page.turns.len()
            )));
        }
        Ok(moot::turn(page, index))
    })
}

async fn moot_state(State(state): State<ControlState>, Path(id): Path<String>) -> Response {
    with_moot(&state, &id, |page, _| Ok(moot::state(page)))
}

/// The start form's fields.
#[derive(Deserialize)]
struct StartForm {
    a: String,
    b: String,
    topic: Option<String>,
    turns: Option<String>,
}

/// `POST /moots` from the overview's form: starts the moot and goes to
/// its page. The listener's rules (same origin on loopback, else the
/// token) have already been applied.
async fn start(State(state): State<ControlState>, body: Bytes) -> Response {
    let form: StartForm = match serde_urlencoded_form(&body) {
        Ok(f) => f,
        Err(e) => return error_page(ApiError::bad_request(e)),
    };
    let turns = match form
        .turns
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        None => None,
        Some(t) => match t.parse::<u32>() {
            Ok(n) => Some(n),
            Err(_) => {
                return error_page(ApiError::bad_request(format!(
                    "turns `{t}` is not a whole number"
                )));
            }
        },
    };
    let request = dto::MootStart {
        trees: vec![form.a, form.b],
        topic: form.topic.filter(|t| !t.trim().is_empty()),
        turns,
        k: None,
        max_tokens: None,
    };
    match state.moots.start(request).await {
        Ok(started) => Redirect::to(&format!("/moots/{}", started.id)).into_response(),
        Err(e) => error_page(e),
    }
}

/// A form body (`application/x-www-form-urlencoded`) read into `T`.
fn serde_urlencoded_form<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    let pairs: serde_json::Map<String, serde_json::Value> = form_urlencoded::parse(body)
        .map(|(k, v)| (k.into_owned(), serde_json::Value::String(v.into_owned())))
        .collect();
    serde_json::from_value(serde_json::Value::Object(pairs)).map_err(|e| format!("the form: {e}"))
}

async fn verify_page() -> Response {
    html(StatusCode::OK, verify::page())
}

#[derive(Deserialize)]
struct VerifyQuery {
    name: Option<String>,
}

/// `POST /verify`: the file's text in the body; answers the verdict as an
/// HTML fragment. Read-only: it checks, and keeps nothing.
async fn verify_file(
    State(state): State<ControlState>,
    Query(q): Query<VerifyQuery>,
    body: Bytes,
) -> Response {
    let name = q.name.unwrap_or_else(|| "the file".into());
    let text = match String::from_utf8(body.to_vec()) {
        Ok(t) => t,
        Err(_) => {
            let e = crate::moot::export::FileError::NotExport("the file is not UTF-8 text".into());
            return html(StatusCode::OK, verify::verdict(&name, &Err(e)));
        }
    };
    let mut chunks = crate::daemon::store::WorkerChunks {
        store: state.books.store.clone(),
        rt: tokio::runtime::Handle::current(),
    };
    let checked = tokio::task::spawn_blocking(move || {
        // Where this node holds a book, its passages are checked against
        // the stored chunks too, as `grove moot verify` on this node does.
        crate::moot::export::verify_file(&text, None, None, Some(&mut chunks))
    })
    .await;
    match checked {
        Ok(result) => html(StatusCode::OK, verify::verdict(&name, &result)),
        Err(e) => error_page(ApiError::new(
            crate::api::ErrorKind::Internal,
            format!("the check stopped: {e}"),
        )),
    }
}

/// `/asks`: the form, and the answers this node gave.
async fn asks_page(State(state): State<ControlState>) -> Response {
    let recent = state
        .asker
        .with_cache(|c| c.recent(50).map_err(|e| ApiError::internal(e.to_string())))
        .await;
    let in_mesh = state.node.mesh.view().roster().is_some();
    match recent {
        Ok(recent) => html(StatusCode::OK, ask::list_page(&recent, in_mesh)),
        Err(e) => error_page(e),
    }
}

/// The ask form's fields.
#[derive(Deserialize)]
struct AskForm {
    question: String,
    /// `mesh` or `local`; absent: local.
    scope: Option<String>,
}

/// `POST /asks` from the ask form: asks (the listener's write rules have
/// been applied), then goes to the answer's page.
async fn ask_form(State(state): State<ControlState>, body: Bytes) -> Response {
    let form: AskForm = match serde_urlencoded_form(&body) {
        Ok(f) => f,
        Err(e) => return error_page(ApiError::bad_request(e)),
    };
    let defaults = crate::ask::AskSettings::default();
    let call = crate::api::ask::AskCall {
        question: form.question,
        books: Vec::new(),
        k: defaults.k,
        temperature: defaults.temperature,
        seed: defaults.seed,
        cache: Some(crate::api::ask::CacheChoice::Strict),
        mesh: form.scope.as_deref() == Some("mesh"),
    };
    match state.asker.ask(call).await {
        Ok(answered) => {
            Redirect::to(&format!("/asks/{}", answered.record.run.root)).into_response()
        }
        Err(e) => error_page(e),
    }
}

/// The kept answer whose run root is `root`.
async fn kept_answer(
    state: &ControlState,
    root: String,
) -> Result<crate::ask::AskRecord, ApiError> {
    if root.len() != 64 || !root.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApiError::bad_request(format!(
            "`{root}` is not a run root (64 hex digits)"
        )));
    }
    let wanted = root.clone();
    state
        .asker
        .with_cache(move |c| {
            c.kept(&wanted)
                .map_err(|e| ApiError::internal(e.to_string()))
        })
        .await?
        .ok_or_else(|| {
            ApiError::not_found(format!("this node kept no answer with run root {root}"))
        })
}

/// `/asks/ROOT`: one answer with its proof panels.
async fn answer_page(State(state): State<ControlState>, Path(root): Path<String>) -> Response {
    match kept_answer(&state, root).await {
        Ok(record) => {
            let view = state.node.mesh.view();
            html(StatusCode::OK, ask::answer_page(&record, view.roster()))
        }
        Err(e) => error_page(e),
    }
}

/// `/asks/ROOT/record`: the record as `grove ask --out` writes it.
async fn answer_record(State(state): State<ControlState>, Path(root): Path<String>) -> Response {
    match kept_answer(&state, root).await {
        Ok(record) => {
            let text = serde_json::to_string_pretty(&record).unwrap_or_default() + "\n";
            let mut r = text.into_response();
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            r
        }
        Err(e) => error_page(e),
    }
}
