//! What an operator's probes read: `/health` (the watchdog's verdict) and
//! `/metrics` (OpenMetrics text), on the control socket and the HTTP
//! listener alike.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use libp2p::PeerId;
use tokio::sync::watch;

use crate::api::books::BookApi;
use crate::api::dto;
use crate::daemon::mesh::MeshWorker;
use crate::daemon::metrics::{self, Metrics, Readings};
use crate::daemon::peers::Peers;
use crate::daemon::store::StoreWorker;

/// The watchdog's latest verdict: `None` while every part is alive, else
/// the first part found dead.
pub type Verdict = watch::Receiver<Option<&'static str>>;

/// What these endpoints read; cheap to clone.
#[derive(Clone)]
pub struct Observe {
    pub health: Verdict,
    pub metrics: Arc<Metrics>,
    pub mesh: MeshWorker,
    pub peers: Peers,
    pub store: StoreWorker,
    /// What the periodic integrity check found.
    pub integrity: crate::daemon::integrity::Integrity,
}

pub async fn health(State(o): State<Observe>) -> Response {
    let failed = *o.health.borrow();
    let damage = o.integrity.damage();
    let (status, health) = match failed {
        Some(part) => ("failed", Some(part)),
        None if !damage.is_empty() => ("damaged", None),
        None => ("ok", None),
    };
    let body = Json(dto::Health {
        status: status.into(),
        part: health.map(str::to_string),
        damage,
    });
    if status == "ok" {
        body.into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
    }
}

/// OpenMetrics when the client asks for it (Prometheus does), else the
/// same numbers in the older Prometheus text format.
pub async fn metrics(State(o): State<Observe>, headers: HeaderMap) -> Response {
    let now = o.readings().await;
    let body = o.metrics.render(now);
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    if openmetrics {
        ([(header::CONTENT_TYPE, metrics::OPENMETRICS)], body).into_response()
    } else {
        let text = metrics::to_prometheus_text(&body);
        ([(header::CONTENT_TYPE, metrics::PROMETHEUS_TEXT)], text).into_response()
    }
}

impl Observe {
    /// The gauges' values now. The book counts come from the store worker;
    /// a store that does not answer leaves them at 0 (and /health says why).
    async fn readings(&self) -> Readings {
        let view = self.mesh.view();
        let mut now = Readings {
            epoch: view.epoch(),
            open_proposals: view.proposals.len() as u64,
            ..Readings::default()
        };
        if let Some(roster) = view.roster() {
            let connected = &self.peers.lock().connected;
            let me = view.me.peer_id.as_slice();
            now.members = roster.members.len() as u64;
            now.members_online = roster
                .members
                .iter()
                .filter(|m| {
                    m.peer_id == me
                        || PeerId::from_bytes(&m.peer_id).is_ok_and(|p| connected.contains(&p))
                })
                .count() as u64;
        }
        now.damaged_databases = self.integrity.damage().len() as u64;
        if let Ok(Ok(shards)) = self.store.call(|b| b.shards()).await {
            for shard in shards.shards {
                now.books += shard.books.len() as u64;
                now.chunks += shard.books.iter().map(|b| b.count).sum::<u64>();
            }
        }
        now
    }
}
