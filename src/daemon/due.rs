//! Work the node loop owes, flagged by whoever noticed it (books changed, a
//! member reconnected, a message from a later epoch arrived). A leaf: the
//! node loop, gossip, moots and the control routes all hold it, and it
//! knows none of them.

use std::sync::atomic::{AtomicBool, Ordering};

/// The flags; everything is due at start.
#[derive(Debug)]
pub struct Due {
    announce: AtomicBool,
    sync: AtomicBool,
    republish: AtomicBool,
    redial: AtomicBool,
}

impl Default for Due {
    fn default() -> Due {
        Due {
            announce: AtomicBool::new(true),
            sync: AtomicBool::new(true),
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
