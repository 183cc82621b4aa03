//! grove's one integration-test crate: each module tests one area, most of
//! them by running the real `grove` binary in a temporary state directory.

mod admission;
mod archs;
mod ask;
mod bad_envelope;
mod books;
#[path = "../src/bin/grove-bench/cdp.rs"]
mod cdp;
mod cli;
mod cluster;
mod code_shape;
mod config;
mod corpus;
mod daemon;
mod docs;
mod events;
mod grounding;
mod hostile;
mod hostile_daemon;
mod http;
mod key_update;
mod mesh;
mod mesh_cli;
mod mesh_state;
mod model;
mod model_install;
mod moot;
mod moot_http;
mod moot_liar;
mod moot_net;
mod natlab;
mod natlab_punch;
mod net;
mod netlab;
mod packaging;
mod proofs;
mod sandbox;
#[path = "support/scripted_openai.rs"]
mod scripted_openai;
mod search;
#[path = "../src/bin/grove-bench/sim.rs"]
mod sim;
mod stolen_disk;
mod support;
mod systemd;
mod vectors;
mod web;
