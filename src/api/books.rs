//! The book operations behind `grove book …`, `shard list` and `audit
//! verify` as the API states them: their requests, the trait the book
//! service (`LocalBooks`, `src/books.rs`) and the daemon's client both
//! answer, and how a store error reads as an API error.

use super::dto;
pub use super::error::{ApiError, ErrorKind};
use crate::book::KeyError;
use crate::db::Cause;
use crate::store::StoreError;

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        let kind = match &e {
            StoreError::NoSuchBook(_)
            | StoreError::NoSuchVersion { .. }
            | StoreError::NoSuchChunk { .. }
            | StoreError::Removed(_)
            | StoreError::NoSuchShard(_)
            | StoreError::NoBooks => ErrorKind::NotFound,
            StoreError::KeyInOtherShard { .. } => ErrorKind::Conflict,
            StoreError::BadShardName(_) | StoreError::Chunks(_) => ErrorKind::BadRequest,
            _ if matches!(e.cause(), Some(Cause::Full | Cause::NotWritable)) => {
                ErrorKind::Unavailable
            }
            _ => ErrorKind::Internal,
        };
        ApiError::new(kind, e.to_string())
    }
}

impl From<KeyError> for ApiError {
    fn from(e: KeyError) -> ApiError {
        ApiError::new(ErrorKind::BadRequest, e.to_string())
    }
}

/// `book add`: where the bytes came from and where they go.
#[derive(Debug, Clone)]
pub struct AddRequest {
    pub key: Option<String>,
    pub shard: Option<String>,
    /// The path or URL, recorded with the book.
    pub source: String,
    /// Store it even when it does not look like text (`text::judge`).
    pub force: bool,
}

/// `book search`: the query and its scope (also the body of `POST
/// /v1/books/search`, inside [`dto::SearchCall`]).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SearchRequest {
    pub query: String,
    pub key: Option<String>,
    pub version: Option<u32>,
    pub k: usize,
}

/// The most hits a search answers, on one node and from every member alike
/// (one `-k` meaning everywhere: past it the search is refused, never cut).
pub const MAX_SEARCH_K: usize = 1000;

impl SearchRequest {
    /// Refuses a `k` out of range.
    pub fn check(&self) -> Result<(), ApiError> {
        if self.k == 0 || self.k > MAX_SEARCH_K {
            return Err(ApiError::bad_request(format!(
                "-k must be between 1 and {MAX_SEARCH_K} (it was {})",
                self.k
            )));
        }
        Ok(())
    }
}

/// The book operations, answered as API types.
pub trait BookApi {
    fn add(
        &mut self,
        req: &AddRequest,
        bytes: &[u8],
        progress: &mut dyn FnMut(u64),
    ) -> Result<dto::Added, ApiError>;
    fn list(&mut self, all: bool) -> Result<dto::BookList, ApiError>;
    fn show(&mut self, key: &str, version: Option<u32>) -> Result<dto::Book, ApiError>;
    fn remove(&mut self, key: &str) -> Result<dto::Book, ApiError>;
    fn proof(
        &mut self,
        key: &str,
        index: u64,
        version: Option<u32>,
    ) -> Result<dto::Proof, ApiError>;
    fn verify(&mut self, key: &str, version: Option<u32>) -> Result<dto::Verified, ApiError>;
    fn search(&mut self, req: &SearchRequest) -> Result<dto::Hits, ApiError>;
    fn shards(&mut self) -> Result<dto::ShardList, ApiError>;
    /// Rewrites one shard (or every shard) without its free pages.
    fn compact(&mut self, shard: Option<&str>) -> Result<dto::Compacted, ApiError>;
    fn audit(&mut self) -> Result<dto::AuditReport, ApiError>;
}
