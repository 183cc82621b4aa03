//! The mesh link: runs a state-machine step on the mesh worker, then carries
//! what the step queued (the outbox in `mesh.db`) out over sealed gossip.
//! Everything that changes the mesh state goes through [`MeshLink::step`],
//! so nothing is sent before it was stored.

use std::sync::Arc;

use prost::Message;

use super::mesh::{ActorError, MeshWorker};
use super::stats::Stats;
use crate::mesh::MeshError;
use crate::mesh::state::{Dest, Effect, MeshState, Transition};
use crate::net::Network;
use crate::net::protocol::mesh_topic;

/// Longest outbox kept while no member can be reached; older messages are
/// dropped (members catch up on commits by sync).
const MAX_OUTBOX: usize = 512;

/// The mesh worker and the way out to the network; cheap to clone.
#[derive(Clone)]
pub struct MeshLink {
    pub worker: MeshWorker,
    net: Network,
    stats: Arc<Stats>,
    flush_lock: Arc<tokio::sync::Mutex<()>>,
}

impl MeshLink {
    pub fn new(worker: MeshWorker, net: Network, stats: Arc<Stats>) -> MeshLink {
        MeshLink {
            worker,
            net,
            stats,
            flush_lock: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    pub fn view(&self) -> Arc<MeshState> {
        self.worker.view()
    }

    /// Runs a state-machine step on the mesh thread and persists it, then
    /// sends what it queued. Returns the transition's inline messages (those
    /// addressed to one peer, which the caller delivers).
    pub async fn step(
        &self,
        f: impl FnOnce(
            &MeshState,
            &crate::identity::Identity,
        ) -> Result<(MeshState, Transition), MeshError>
        + Send
        + 'static,
    ) -> Result<Transition, ActorError> {
        self.run(move |core| {
            let r = f(&core.state, &core.id);
            core.apply(r)
        })
        .await
    }

    /// `grove identity rotate` (§8b): proposes this node's key update, as
    /// [`MeshLink::step`] does a state-machine step.
    pub async fn rotate_key(&self) -> Result<Transition, ActorError> {
        self.run(|core| core.rotate_key()).await
    }

    /// Runs `f` on the mesh thread, then counts the commits it applied and
    /// sends what it queued.
    async fn run(
        &self,
        f: impl FnOnce(&mut super::mesh::MeshCore) -> Result<Transition, ActorError> + Send + 'static,
    ) -> Result<Transition, ActorError> {
        let t = self.worker.call(f).await??;
        // A new tip is a commit this node applied (its genesis, a welcome,
        // or a roster change it made or received).
        let commits = t
            .effects
            .iter()
            .filter(|e| matches!(e, Effect::SetTip(_)))
            .count();
        self.stats.add("mesh.commits.applied", commits as u64);
        self.flush().await;
        Ok(t)
    }

    /// Steps the state machine on one received mesh message (encoded
    /// `MeshMessage`).
    pub async fn receive(&self, message: Vec<u8>) -> Result<Transition, ActorError> {
        self.step(move |s, id| s.receive(id, &message, crate::now_ms(), &mut rand::rng()))
            .await
    }

    /// Sends queued mesh messages in order: each goes out sealed on the mesh
    /// topic and leaves the outbox once gossipsub took it. Messages for one
    /// peer were delivered inline by whoever made them.
    pub async fn flush(&self) {
        let _one_at_a_time = self.flush_lock.lock().await;
        let queued = match self.worker.call(|core| core.store.outbox()).await {
            Ok(Ok(q)) => q,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "reading the mesh outbox");
                return;
            }
            Err(_) => return,
        };
        let view = self.view();
        let alone = view
            .roster()
            .is_none_or(|r| r.members.len() <= 1 || !view.is_member());
        let too_many = queued.len() > MAX_OUTBOX;
        let mut acked = None;
        for q in &queued {
            if let Dest::All = q.to
                && !alone
                && let Some(mesh) = &view.mesh
            {
                let topic = mesh_topic(&mesh.mesh_id);
                // Bound first: the thread-local rng must not live across
                // the await below.
                let sealed = view.seal_mesh_message(&topic, &q.message, &mut rand::rng());
                match sealed {
                    Ok(sealed) => {
                        if let Err(e) = self.net.publish(&topic, sealed.encode_to_vec()).await
                            && !too_many
                        {
                            tracing::debug!(error = %e, "mesh message kept for a retry");
                            break;
                        }
                        self.stats.bump("gossip.published");
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot seal a queued mesh message; dropped")
                    }
                }
            }
            acked = Some(q.seq);
        }
        if let Some(seq) = acked
            && let Ok(Err(e)) = self
                .worker
                .call(move |core| core.store.ack_outbox(seq))
                .await
        {
            // The messages went out; they are sent once more after a restart.
            tracing::warn!(error = %e, "mesh outbox not cleared");
        }
    }
}
