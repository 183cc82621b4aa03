//! The node's event names, each once with the family whose shape its line
//! has (`/v1/events`, docs/cli-json.md): what the stream's readers, the
//! `[hooks]` settings and the shapes (the grove crate's `api::dto`) all
//! read. Pure data, so the settings can check `hooks.events` without the
//! daemon.

/// Which shape an event's line has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Mesh membership ([`MeshEvent`]): `mesh watch` prints these, and
    /// `[hooks]` run on them.
    Membership,
    /// A hosted moot's life ([`MootEvent`]).
    Moot,
    /// A book stored or removed here ([`BookEvent`]).
    Book,
    /// How this node is reached ([`ReachabilityEvent`]).
    Reachability,
    /// The integrity of this node's databases ([`DatabaseEvent`]).
    Database,
    /// About the stream itself (`watch_dropped`, a [`MeshEvent`] shape).
    Stream,
}

/// Every event name, and its family.
pub const EVENTS: &[(&str, Family)] = &[
    ("proposal_opened", Family::Membership),
    ("vote_cast", Family::Membership),
    ("committed", Family::Membership),
    ("rejected", Family::Membership),
    ("withdrawn", Family::Membership),
    ("expired", Family::Membership),
    ("joined", Family::Membership),
    ("removed", Family::Membership),
    ("member_online", Family::Membership),
    ("member_offline", Family::Membership),
    ("envelope_proven", Family::Membership),
    ("moot_started", Family::Moot),
    ("moot_turn", Family::Moot),
    ("moot_paused", Family::Moot),
    ("moot_resumed", Family::Moot),
    ("moot_finished", Family::Moot),
    ("book_added", Family::Book),
    ("book_removed", Family::Book),
    ("reachability_changed", Family::Reachability),
    ("database_damaged", Family::Database),
    ("database_recovered", Family::Database),
    ("watch_dropped", Family::Stream),
];

/// The family of an event name (`None`: not an event name).
pub fn family(name: &str) -> Option<Family> {
    EVENTS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// The names of one family, in order.
pub fn names(of: Family) -> impl Iterator<Item = &'static str> {
    EVENTS
        .iter()
        .filter(move |(_, f)| *f == of)
        .map(|(n, _)| *n)
}

/// The events `[hooks]` run on (`hooks.events` names them): the
/// membership events.
pub fn hook_events() -> impl Iterator<Item = &'static str> {
    names(Family::Membership)
}
