//! The control API: the JSON that commands print (`dto`), the book
//! operations both the CLI and the daemon run (`books`), and the HTTP+JSON
//! control socket (`server`, `client`). The only place domain data is
//! serialized besides `proto/` wire types and transcripts.

pub mod books;
pub mod client;
pub mod dto;
mod node_routes;
pub mod server;
