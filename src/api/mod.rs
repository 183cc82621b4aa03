//! The control API's types: the JSON that commands print and (later) the
//! daemon's control socket speaks. The only place domain data is serialized
//! besides `proto/` wire types and transcripts.

pub mod dto;
