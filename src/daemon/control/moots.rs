//! Hosted-moot endpoints: start, resume, list, show and export, each one
//! call on the [`MootHost`].

use axum::Json;
use axum::extract::State;
use serde::Deserialize;

use super::{Answer, Query};
use crate::api::dto;
use crate::daemon::moots::MootHost;

#[derive(Deserialize)]
pub struct StartQuery {
    /// One tree per line: PEER:KEY never holds a newline.
    trees: String,
    topic: Option<String>,
    turns: Option<u32>,
    k: Option<usize>,
    max_tokens: Option<u32>,
}

pub async fn start(
    State(host): State<MootHost>,
    Query(q): Query<StartQuery>,
) -> Answer<dto::MootStarted> {
    let start = dto::MootStart {
        trees: q.trees.lines().map(str::to_string).collect(),
        topic: q.topic.filter(|t| !t.trim().is_empty()),
        turns: q.turns,
        k: q.k,
        max_tokens: q.max_tokens,
    };
    Ok(Json(host.start(start).await?))
}

#[derive(Deserialize)]
pub struct IdQuery {
    id: String,
}

pub async fn resume(
    State(host): State<MootHost>,
    Query(q): Query<IdQuery>,
) -> Answer<dto::MootStarted> {
    Ok(Json(host.resume(&q.id).await?))
}

pub async fn list(State(host): State<MootHost>) -> Json<dto::MootList> {
    Json(host.book.list())
}

pub async fn show(State(host): State<MootHost>, Query(q): Query<IdQuery>) -> Answer<dto::MootView> {
    Ok(Json(host.book.show(&q.id)?))
}

pub async fn export(
    State(host): State<MootHost>,
    Query(q): Query<IdQuery>,
) -> Answer<dto::MootExport> {
    Ok(Json(host.export(&q.id).await?))
}
