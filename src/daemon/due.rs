//! Work the node loop owes, flagged by whoever noticed it (books changed, a
//! member reconnected, a message from a later epoch arrived). A leaf: the
//! node loop, gossip, moots and the control routes all hold it, and it
//! knows none of them.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use libp2p::PeerId;

/// Most members remembered as worth asking first in the next sync.
const MAX_SYNC_FROM: usize = 16;

/// The flags; everything is due at start.
#[derive(Debug)]
pub struct Due {
    announce: AtomicBool,
    sync: AtomicBool,
    /// Members that may hold commits this node lacks (one that reappeared,
    /// one whose gossip is of a later epoch): the next sync asks them
    /// first, because a request to members as far behind as this node
    /// brings nothing.
    sync_from: Mutex<Vec<PeerId>>,
    republish: AtomicBool,
    redial: AtomicBool,
}

impl Default for Due {
    fn default() -> Due {
        Due {
            announce: AtomicBool::new(true),
            sync: AtomicBool::new(true),
            sync_from: Mutex::default(),
            republish: AtomicBool::new(true),
            redial: AtomicBool::new(true),
        }
    }
}

impl Due {
    /// This node's books changed: announce its roots again.
    pub fn announce(&self) {
        self.announce.store(true, Ordering::Relaxed);
    }

    /// This node may be behind: ask members for commits.
    pub fn sync(&self) {
        self.sync.store(true, Ordering::Relaxed);
    }

    /// This node may be behind `peer`: ask members for commits, `peer`
    /// first.
    pub fn sync_from(&self, peer: PeerId) {
        let mut from = self.sync_from.lock().unwrap_or_else(|e| e.into_inner());
        if !from.contains(&peer) && from.len() < MAX_SYNC_FROM {
            from.push(peer);
        }
        drop(from);
        self.sync();
    }

    /// The members to ask first in this sync, clearing them.
    pub fn take_sync_from(&self) -> Vec<PeerId> {
        std::mem::take(&mut *self.sync_from.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Re-send this node's open proposals and votes (a member reconnected).
    pub fn republish(&self) {
        self.republish.store(true, Ordering::Relaxed);
    }

    /// A member's addresses are known now: dial it on the next tick.
    pub fn redial(&self) {
        self.redial.store(true, Ordering::Relaxed);
    }

    /// An announcement is owed; it stays owed until [`Due::announced`].
    pub fn announce_is_due(&self) -> bool {
        self.announce.load(Ordering::Relaxed)
    }

    /// The announcement went out.
    pub fn announced(&self) {
        self.announce.store(false, Ordering::Relaxed);
    }

    /// A sync is owed; it stays owed until [`Due::synced`].
    pub fn sync_is_due(&self) -> bool {
        self.sync.load(Ordering::Relaxed)
    }

    /// The sync request went out (or there is no one to ask).
    pub fn synced(&self) {
        self.sync.store(false, Ordering::Relaxed);
    }

    /// Whether a republish is owed, clearing it.
    pub fn take_republish(&self) -> bool {
        self.republish.swap(false, Ordering::Relaxed)
    }

    /// Whether a redial is owed, clearing it.
    pub fn take_redial(&self) -> bool {
        self.redial.swap(false, Ordering::Relaxed)
    }
}
