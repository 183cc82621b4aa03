//! Book, shard and audit endpoints: each runs one `BookApi` operation on
//! the store worker (the shards' one writer); a change to the books makes
//! the node announce its roots again.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use serde::Deserialize;

use super::{Answer, Query};
use crate::api::books::{AddRequest, BookApi};
use crate::api::{ApiError, dto};
use crate::daemon::due::Due;
use crate::daemon::events::Events;
use crate::daemon::rpc::{self, Rpc};
use crate::daemon::stats::Stats;
use crate::daemon::store::StoreWorker;

/// What the book endpoints need; cheap to clone.
#[derive(Clone)]
pub struct Books {
    pub store: StoreWorker,
    pub due: Arc<Due>,
    /// The largest book body accepted, in bytes.
    pub max_body: usize,
    /// Where books added and removed are published.
    pub events: Events,
    /// Ingest counters and latency.
    pub stats: Arc<Stats>,
}

/// `true` in a query string.
fn flag(value: &Option<String>) -> bool {
    value.as_deref() == Some("true")
}

pub async fn node_info(State(info): State<Arc<dto::NodeInfo>>) -> Json<dto::NodeInfo> {
    Json(dto::NodeInfo::clone(&info))
}

#[derive(Deserialize)]
pub struct AddQuery {
    key: Option<String>,
    shard: Option<String>,
    source: Option<String>,
    /// `true`: store it even when it does not look like text.
    force: Option<String>,
}

pub async fn add(
    State(books): State<Books>,
    Query(q): Query<AddQuery>,
    body: Result<Bytes, BytesRejection>,
) -> Answer<dto::Added> {
    let bytes = body.map_err(|e| {
        ApiError::bad_request(format!(
            "book body refused: {} (limit {} bytes)",
            e.body_text(),
            books.max_body
        ))
    })?;
    let add = AddRequest {
        key: q.key,
        shard: q.shard,
        source: q.source.unwrap_or_else(|| "(control socket)".into()),
        force: flag(&q.force),
    };
    let size = bytes.len() as u64;
    let started = std::time::Instant::now();
    let added = books
        .store
        .call(move |b| b.add(&add, &bytes, &mut |_| {}))
        .await??;
    let status = match added.status.as_str() {
        "added" => "added",
        "new-version" => "new-version",
        _ => "unchanged",
    };
    crate::daemon::stats::observe(
        &books.stats.ingest_seconds,
        "status",
        status,
        started.elapsed(),
    );
    books.stats.bump(&format!("ingest.books.{status}"));
    books.stats.add("ingest.bytes", size);
    books.due.announce();
    if added.status != "unchanged" {
        books.events.publish(dto::BookEvent {
            event: "book_added".into(),
            at: crate::now_ms(),
            detail: format!(
                "book {} added ({}, version {})",
                added.key, added.status, added.version
            ),
            key: added.key.clone(),
            title: added.title.clone(),
            version: added.version,
            root: added.root.clone(),
        });
    }
    Ok(Json(added))
}

#[derive(Deserialize)]
pub struct ListQuery {
    all: Option<String>,
}

pub async fn list(State(books): State<Books>, Query(q): Query<ListQuery>) -> Answer<dto::BookList> {
    let all = flag(&q.all);
    Ok(Json(books.store.call(move |b| b.list(all)).await??))
}

#[derive(Deserialize)]
pub struct BookQuery {
    key: String,
    version: Option<u32>,
}

pub async fn show(State(books): State<Books>, Query(q): Query<BookQuery>) -> Answer<dto::Book> {
    Ok(Json(
        books
            .store
            .call(move |b| b.show(&q.key, q.version))
            .await??,
    ))
}

#[derive(Deserialize)]
pub struct KeyQuery {
    key: String,
}

pub async fn remove(State(books): State<Books>, Query(q): Query<KeyQuery>) -> Answer<dto::Book> {
    let removed = books.store.call(move |b| b.remove(&q.key)).await??;
    books.due.announce();
    books.events.publish(dto::BookEvent {
        event: "book_removed".into(),
        at: crate::now_ms(),
        detail: format!("book {} removed", removed.key),
        key: removed.key.clone(),
        title: removed.title.clone(),
        version: removed.version,
        root: removed.root.clone(),
    });
    Ok(Json(removed))
}

#[derive(Deserialize)]
pub struct ProofQuery {
    key: String,
    index: u64,
    version: Option<u32>,
}

pub async fn proof(State(books): State<Books>, Query(q): Query<ProofQuery>) -> Answer<dto::Proof> {
    Ok(Json(
        books
            .store
            .call(move |b| b.proof(&q.key, q.index, q.version))
            .await??,
    ))
}

pub async fn verify(
    State(books): State<Books>,
    Query(q): Query<BookQuery>,
) -> Answer<dto::Verified> {
    Ok(Json(
        books
            .store
            .call(move |b| b.verify(&q.key, q.version))
            .await??,
    ))
}

pub async fn search(
    State(books): State<Books>,
    State(rpc): State<Rpc>,
    body: Bytes,
) -> Answer<dto::Hits> {
    let call: dto::SearchCall = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("a malformed search: {e}")))?;
    let max = rpc.limits.max_query_bytes;
    if call.request.query.len() > max {
        return Err(ApiError::bad_request(format!(
            "a query of {} bytes is over the limit of {max} (net.max_query_bytes)",
            call.request.query.len()
        )));
    }
    let request = call.request;
    let started = std::time::Instant::now();
    let (scope, hits) = if call.mesh {
        ("mesh", rpc::search::mesh_search(&rpc, request).await?)
    } else {
        (
            "local",
            books.store.call(move |b| b.search(&request)).await??,
        )
    };
    crate::daemon::stats::observe(&rpc.stats.search_seconds, "scope", scope, started.elapsed());
    Ok(Json(hits))
}

pub async fn shards(State(books): State<Books>) -> Answer<dto::ShardList> {
    Ok(Json(books.store.call(|b| b.shards()).await??))
}

#[derive(Deserialize)]
pub struct CompactQuery {
    shard: Option<String>,
}

pub async fn compact(
    State(books): State<Books>,
    Query(q): Query<CompactQuery>,
) -> Answer<dto::Compacted> {
    Ok(Json(
        books
            .store
            .call(move |b| b.compact(q.shard.as_deref()))
            .await??,
    ))
}

pub async fn audit(State(books): State<Books>) -> Answer<dto::AuditReport> {
    Ok(Json(books.store.call(|b| b.audit()).await??))
}
