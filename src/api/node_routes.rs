//! Control endpoints of the running node: identity, mesh membership, peers,
//! roots and stats. Each maps one request onto one `daemon::node::Node`
//! operation (daemon/control.rs).

use std::collections::HashMap;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Response, StatusCode};

use super::books::ApiError;
use super::dto;
use super::server::{bad, error, json, number, reply, required};
use crate::daemon::node::Node;

pub(super) async fn handle(
    method: &Method,
    path: &str,
    q: &HashMap<String, String>,
    node: &Node,
    node_name: Option<&str>,
) -> Response<Full<Bytes>> {
    let ok = |v: &dyn erased::Json| v.respond();
    match (method.clone(), path) {
        (Method::GET, "/v1/identity") => ok(&node.identity_view()),
        (Method::GET, "/v1/peers") => ok(&node.peer_list()),
        (Method::GET, "/v1/roots") => ok(&node.roots()),
        (Method::GET, "/v1/node/stats") => ok(&node.stats()),
        (Method::GET, "/v1/node/gossip") => ok(&dto::RecentGossip {
            messages: node
                .recent_gossip()
                .into_iter()
                .map(|(topic, bytes)| dto::SealedGossip {
                    topic,
                    sealed: hex::encode(bytes),
                })
                .collect(),
        }),
        (Method::GET, "/v1/mesh/status") => reply(node.mesh_status()),
        (Method::GET, "/v1/mesh/proposals") => reply(node.mesh_proposals()),
        (Method::GET, "/v1/mesh/invites") => ok(&node.mesh_invites()),
        (Method::POST, "/v1/mesh/init") => match required(q, "name") {
            Ok(name) => {
                let quorum = q.get("quorum").cloned().unwrap_or_else(|| "1/2".into());
                let member = q
                    .get("as")
                    .cloned()
                    .or_else(|| node_name.map(str::to_string))
                    .unwrap_or_else(|| "founder".into());
                reply(node.mesh_init(name, member, &quorum).await)
            }
            Err(e) => error(&e),
        },
        (Method::POST, "/v1/mesh/invite") => match number::<u64>(q, "ttl_secs") {
            Ok(ttl) => reply(
                node.mesh_invite(ttl, q.get("note").cloned().unwrap_or_default())
                    .await,
            ),
            Err(e) => error(&e),
        },
        (Method::POST, "/v1/mesh/invite/revoke") => match required(q, "id") {
            Ok(id) => reply(node.mesh_revoke(&id).await),
            Err(e) => error(&e),
        },
        (Method::POST, "/v1/mesh/join") => match required(q, "invite") {
            Ok(invite) => {
                let name = q
                    .get("name")
                    .cloned()
                    .or_else(|| node_name.map(str::to_string));
                match name {
                    Some(name) => reply(node.mesh_join(invite, name).await),
                    None => error(&bad(
                        "a display name is needed: pass --name or set node.name".into(),
                    )),
                }
            }
            Err(e) => error(&e),
        },
        (Method::POST, "/v1/mesh/propose") => match required(q, "kind") {
            Ok(kind) => reply(
                node.mesh_propose(&kind, q.get("target").map(String::as_str))
                    .await,
            ),
            Err(e) => error(&e),
        },
        (Method::POST, "/v1/mesh/vote") => match (required(q, "id"), required(q, "choice")) {
            (Ok(id), Ok(choice)) => reply(node.mesh_vote(&id, &choice).await),
            (Err(e), _) | (_, Err(e)) => error(&e),
        },
        (Method::POST, "/v1/mesh/leave") => reply(node.mesh_leave().await),
        (Method::POST, "/v1/moot/start") => {
            let numbers = (
                number::<u32>(q, "turns"),
                number::<usize>(q, "k"),
                number::<u32>(q, "max_tokens"),
            );
            match (required(q, "trees"), numbers) {
                (Ok(trees), (Ok(turns), Ok(k), Ok(max_tokens))) => {
                    let start = dto::MootStart {
                        // One tree per line: PEER:KEY never holds a newline.
                        trees: trees.lines().map(str::to_string).collect(),
                        topic: q.get("topic").cloned().filter(|t| !t.trim().is_empty()),
                        turns,
                        k,
                        max_tokens,
                    };
                    reply(node.moot_start(start).await)
                }
                (Err(e), _) | (_, (Err(e), _, _)) | (_, (_, Err(e), _)) | (_, (_, _, Err(e))) => {
                    error(&e)
                }
            }
        }
        (Method::GET, "/v1/moots") => ok(&node.shared().moots.list()),
        (Method::POST, "/v1/moot/resume") => match required(q, "id") {
            Ok(id) => reply(node.moot_resume(&id).await),
            Err(e) => error(&e),
        },
        (Method::GET, "/v1/moot/show") => match required(q, "id") {
            Ok(id) => reply(node.shared().moots.show(&id)),
            Err(e) => error(&e),
        },
        (Method::GET, "/v1/moot/export") => match required(q, "id") {
            Ok(id) => reply(node.moot_export(&id).await),
            Err(e) => error(&e),
        },
        (method, path) => json(
            StatusCode::NOT_FOUND,
            &dto::ErrorBody {
                error: format!("no such control endpoint: {method} {path}"),
            },
        ),
    }
}

/// Plain (infallible) answers through one helper.
mod erased {
    use super::*;

    pub trait Json {
        fn respond(&self) -> Response<Full<Bytes>>;
    }

    impl<T: serde::Serialize> Json for T {
        fn respond(&self) -> Response<Full<Bytes>> {
            reply::<&T>(Ok::<&T, ApiError>(self))
        }
    }
}
