//! The mesh worker: one thread owns the node's identity, `mesh.db` and the
//! membership state, so every transition is decided and persisted in order
//! (one SQLite transaction each) before anything is sent. Others read a
//! snapshot of the state through a watch channel.

use std::sync::Arc;

use tokio::sync::watch;

use super::events::Events;
use super::worker::{Stopped, Worker};
use crate::identity::Identity;
use crate::mesh::MeshError;
use crate::mesh::roster::KeyUpdate;
use crate::mesh::state::{MeshState, ProposalChange, Transition};
use crate::mesh::store::{MeshStore, MeshStoreError, StateLock};

/// Why a mesh operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ActorError {
    /// The state machine refused; nothing changed.
    #[error(transparent)]
    Refused(#[from] MeshError),
    #[error(transparent)]
    Store(#[from] MeshStoreError),
    #[error("the node is shutting down")]
    Stopped(#[from] Stopped),
    /// A key file of a key update could not be written or erased.
    #[error(transparent)]
    Key(#[from] crate::identity::IdentityError),
}

/// What a job works on.
pub struct MeshCore {
    _lock: StateLock,
    pub id: Identity,
    /// `<state_dir>/identity`: where a key update's key files are.
    keys: std::path::PathBuf,
    pub store: MeshStore,
    pub state: MeshState,
    /// Where each persisted transition's membership events go.
    pub events: Events,
}

impl MeshCore {
    /// Opens `mesh.db` under the state lock (held for the daemon's life, so
    /// offline mesh commands cannot write beside it).
    pub fn open(
        state_dir: &std::path::Path,
        mut id: Identity,
        timing: crate::mesh::state::Timing,
    ) -> Result<MeshCore, ActorError> {
        let lock = StateLock::acquire(state_dir)?;
        let store = MeshStore::open_in(state_dir)?;
        let keys = crate::state_dir::StateDir::new(state_dir).identity();
        crate::identity::load_pending(&keys, &mut id)?;
        let state = store.load(id.public(), timing)?;
        let mut core = MeshCore {
            _lock: lock,
            id,
            keys,
            store,
            state,
            events: Events::default(),
        };
        // A key update whose commit was applied before a crash finishes.
        core.settle_key()?;
        Ok(core)
    }

    /// Persists a transition in one transaction, then adopts the new state.
    /// A refusal that left evidence (equivocation) is persisted and then
    /// reported as the refusal.
    pub fn apply(
        &mut self,
        result: Result<(MeshState, Transition), MeshError>,
    ) -> Result<Transition, ActorError> {
        let (state, transition) = result?;
        let now = crate::now_ms();
        self.store.persist(&transition, now)?;
        for e in super::events::of_transition(&self.state, &state, &transition, now) {
            self.events.publish(e);
        }
        self.state = state;
        self.settle_key()?;
        if let Some(refused) = &transition.refused {
            return Err(ActorError::Refused(refused.clone()));
        }
        Ok(transition)
    }

    /// `grove identity rotate`: saves a new X25519 key as pending (or takes
    /// the one an unfinished update saved) and proposes the key update
    /// (§8b), which passes on this node's own yes.
    pub fn rotate_key(&mut self) -> Result<Transition, ActorError> {
        let (x25519, x25519_binding) = crate::identity::pending_or_new(&self.keys, &mut self.id)?;
        let change = ProposalChange::UpdateKey(KeyUpdate {
            member: self.id.peer_id(),
            x25519,
            x25519_binding,
        });
        let r = self
            .state
            .propose(&self.id, change, crate::now_ms(), &mut rand::rng());
        self.apply(r)
    }

    /// Once this node's key update is settled (`MeshState::key_settled`:
    /// one commit deep, and persisted, as `apply` runs this after), the
    /// pending key becomes the key and the old one is erased.
    fn settle_key(&mut self) -> Result<(), ActorError> {
        let Some((pending, _)) = self.id.pending_x25519_public() else {
            return Ok(());
        };
        if !self.state.key_settled(&pending) {
            return Ok(());
        }
        crate::identity::promote_pending(&self.keys, &mut self.id)?;
        self.state.me = self.id.public();
        Ok(())
    }
}

/// A handle to the mesh worker; cheap to clone.
#[derive(Clone)]
pub struct MeshWorker {
    worker: Worker<MeshCore>,
    view: watch::Receiver<Arc<MeshState>>,
    events: Events,
}

impl MeshWorker {
    /// Starts the thread; it ends when every handle is dropped.
    pub fn spawn(core: MeshCore) -> std::io::Result<(MeshWorker, std::thread::JoinHandle<()>)> {
        let (publish, view) = watch::channel(Arc::new(core.state.clone()));
        let events = core.events.clone();
        let (worker, thread) = Worker::spawn("mesh", 64, core, move |core: &mut MeshCore| {
            publish.send_if_modified(|shown| {
                if **shown == core.state {
                    return false;
                }
                *shown = Arc::new(core.state.clone());
                true
            });
        })?;
        Ok((
            MeshWorker {
                worker,
                view,
                events,
            },
            thread,
        ))
    }

    /// Runs `f` on the mesh thread and waits for its answer.
    pub async fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut MeshCore) -> R + Send + 'static,
    ) -> Result<R, Stopped> {
        self.worker.call(f).await
    }

    /// The state as of the last finished job.
    pub fn view(&self) -> Arc<MeshState> {
        self.view.borrow().clone()
    }

    /// A receiver that wakes on every state change.
    pub fn watch(&self) -> watch::Receiver<Arc<MeshState>> {
        self.view.clone()
    }

    /// The membership events of every transition (and members online or
    /// offline, which the node loop adds).
    pub fn events(&self) -> &Events {
        &self.events
    }

    pub fn is_alive(&self) -> bool {
        self.worker.is_alive()
    }

    pub async fn inject_panic(&self) {
        self.worker.inject_panic().await
    }
}

impl From<ActorError> for crate::api::ApiError {
    fn from(e: ActorError) -> crate::api::ApiError {
        use crate::api::ErrorKind;
        let kind = match &e {
            ActorError::Refused(MeshError::NoMesh)
            | ActorError::Refused(MeshError::UnknownProposal(_))
            | ActorError::Refused(MeshError::UnknownInvite(_)) => ErrorKind::NotFound,
            // The operator's own input: a bad name, note or invite text.
            ActorError::Refused(MeshError::Name(_))
            | ActorError::Refused(MeshError::InviteText(_)) => ErrorKind::BadRequest,
            ActorError::Refused(_) => ErrorKind::Conflict,
            ActorError::Store(_) | ActorError::Key(_) => ErrorKind::Internal,
            ActorError::Stopped(_) => ErrorKind::Unavailable,
        };
        crate::api::ApiError::new(kind, e.to_string())
    }
}

/// Refuses a command that needs membership on a node the mesh removed
/// ("this node is no longer a member of mesh M (removed at epoch E)"); a
/// node with no mesh, or a member, passes.
pub fn refuse_if_removed(view: &MeshState) -> Result<(), crate::api::ApiError> {
    match view.require_member() {
        Err(e @ MeshError::Removed { .. }) => Err(ActorError::Refused(e).into()),
        _ => Ok(()),
    }
}
