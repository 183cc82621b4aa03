//! `/v1/events`: the node's one event stream, one JSON object per line
//! (`mesh watch`, `moot watch` and the HTTP listener's readers), optionally
//! one moot's events only. A listener that caps its streams hands the
//! handler its [`StreamSlots`]; a stream holds one slot while it lasts.

use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tokio::sync::Semaphore;

use super::Query;
use crate::api::ApiError;
use crate::daemon::events::{Events, Filter, watch_lines};

/// Streams a listener serves at once (the HTTP listener's, so long-lived
/// streams cannot take every connection it accepts).
#[derive(Clone)]
pub struct StreamSlots(pub Arc<Semaphore>);

#[derive(Deserialize)]
pub struct EventsQuery {
    moot: Option<String>,
}

pub async fn events(
    State(events): State<Events>,
    slots: Option<Extension<StreamSlots>>,
    Query(q): Query<EventsQuery>,
) -> Response {
    let slot = match slots {
        Some(Extension(StreamSlots(slots))) => match slots.try_acquire_owned() {
            Ok(slot) => Some(slot),
            Err(_) => {
                return ApiError::unavailable(
                    "too many event streams are open on this listener; close one and watch again",
                )
                .into_response();
            }
        },
        None => None,
    };
    let filter = Filter {
        moot: q.moot.filter(|m| !m.is_empty()),
    };
    let lines = watch_lines(events.subscribe(), filter, slot);
    Response::builder()
        .header(axum::http::header::CONTENT_TYPE, "application/x-ndjson")
        // A proxy must pass each line on as it comes.
        .header(axum::http::header::CACHE_CONTROL, "no-store")
        .header("x-accel-buffering", "no")
        .body(axum::body::Body::from_stream(lines))
        .unwrap_or_default()
}
