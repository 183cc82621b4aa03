//! Mesh membership: signed roster, epochs, envelopes, invites and votes.
