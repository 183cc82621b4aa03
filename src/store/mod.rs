//! SQLite shards: books, chunks, Merkle levels, search and the audit chain.

pub mod audit;

/// A shard name that cannot be used as one.
#[derive(Debug, thiserror::Error)]
#[error(
    "invalid shard name `{0}`: use lowercase letters, digits and '-', starting with a letter or digit"
)]
pub struct BadShardName(pub String);

/// Checks a shard name: `^[a-z0-9][a-z0-9-]*$`, at most 64 bytes.
pub fn validate_shard_name(name: &str) -> Result<(), BadShardName> {
    let ok = name.len() <= 64
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(BadShardName(name.to_string()))
    }
}
