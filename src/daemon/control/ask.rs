//! `POST /v1/ask`: one ask on the [`Asker`], its time counted by scope.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;

use super::Answer;
use crate::api::ApiError;
use crate::api::ask::{Answered, AskCall};
use crate::daemon::ask::Asker;

pub async fn ask(State(asker): State<Asker>, body: Bytes) -> Answer<Answered> {
    let call: AskCall = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("a malformed ask: {e}")))?;
    let scope = if call.mesh { "mesh" } else { "local" };
    let started = std::time::Instant::now();
    let answered = asker.ask(call).await;
    let stats = &asker.rpc.stats;
    crate::daemon::stats::observe(&stats.ask_seconds, "scope", scope, started.elapsed());
    Ok(Json(answered?))
}
