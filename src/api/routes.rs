//! The control API's paths, each named once: the daemon's route table
//! (`daemon/control`), the client and the CLI all use these constants.

/// The operator's probes, served on the HTTP listener too.
pub const HEALTH: &str = "/health";
pub const METRICS: &str = "/metrics";

pub const EVENTS: &str = "/v1/events";
pub const NODE: &str = "/v1/node";
pub const BOOKS: &str = "/v1/books";
pub const BOOKS_ADD: &str = "/v1/books/add";
pub const BOOKS_SHOW: &str = "/v1/books/show";
pub const BOOKS_REMOVE: &str = "/v1/books/remove";
pub const BOOKS_PROOF: &str = "/v1/books/proof";
pub const BOOKS_VERIFY: &str = "/v1/books/verify";
pub const BOOKS_SEARCH: &str = "/v1/books/search";
pub const SHARDS: &str = "/v1/shards";
pub const SHARDS_COMPACT: &str = "/v1/shards/compact";
pub const AUDIT: &str = "/v1/audit";
pub const IDENTITY: &str = "/v1/identity";
pub const IDENTITY_ROTATE: &str = "/v1/identity/rotate";
pub const PEERS: &str = "/v1/peers";
pub const ROOTS: &str = "/v1/roots";
pub const NODE_STATS: &str = "/v1/node/stats";
pub const NODE_DOCTOR: &str = "/v1/node/doctor";
pub const NODE_GOSSIP: &str = "/v1/node/gossip";
pub const MESH_STATUS: &str = "/v1/mesh/status";
pub const MESH_PROPOSALS: &str = "/v1/mesh/proposals";
pub const MESH_INVITES: &str = "/v1/mesh/invites";
pub const MESH_INIT: &str = "/v1/mesh/init";
pub const MESH_INVITE: &str = "/v1/mesh/invite";
pub const MESH_INVITE_REVOKE: &str = "/v1/mesh/invite/revoke";
pub const MESH_JOIN: &str = "/v1/mesh/join";
pub const MESH_PROPOSE: &str = "/v1/mesh/propose";
pub const MESH_VOTE: &str = "/v1/mesh/vote";
pub const MESH_WITHDRAW: &str = "/v1/mesh/withdraw";
pub const MESH_LEAVE: &str = "/v1/mesh/leave";
pub const MOOTS: &str = "/v1/moots";
pub const MOOT_START: &str = "/v1/moot/start";
pub const MOOT_RESUME: &str = "/v1/moot/resume";
pub const MOOT_SHOW: &str = "/v1/moot/show";
pub const MOOT_EXPORT: &str = "/v1/moot/export";
pub const ASK: &str = "/v1/ask";

/// Route families (no route of their own): a change sent under one is
/// checked with the same command (`api::client`).
pub const MESH_FAMILY: &str = "/v1/mesh/";
pub const MOOT_FAMILY: &str = "/v1/moot";
