//! The book operations through a running daemon, done in this process
//! instead when the daemon stopped before a request reached it.

use grove::api::books::{AddRequest, BookApi, ErrorKind, SearchRequest};
use grove::api::client::Client;
use grove::api::{ApiError, dto};
use grove::books::LocalBooks;

/// The book operations through the daemon, done in this process instead
/// when the daemon stopped before a request reached it: the same as when
/// no daemon runs, so a daemon killed between the CLI's check and its
/// request changes nothing for the operator.
pub struct OrLocal {
    pub client: Client,
    pub local: LocalBooks,
}

impl OrLocal {
    fn either<T>(
        &mut self,
        daemon: impl FnOnce(&mut Client) -> Result<T, ApiError>,
        local: impl FnOnce(&mut LocalBooks) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        or_local(daemon(&mut self.client), || local(&mut self.local))
    }
}

impl BookApi for OrLocal {
    fn add(
        &mut self,
        req: &AddRequest,
        bytes: &[u8],
        progress: &mut dyn FnMut(u64),
    ) -> Result<dto::Added, ApiError> {
        let answered = self.client.add(req, bytes, progress);
        or_local(answered, || self.local.add(req, bytes, progress))
    }

    fn list(&mut self, all: bool) -> Result<dto::BookList, ApiError> {
        self.either(|c| c.list(all), |l| l.list(all))
    }

    fn show(&mut self, key: &str, version: Option<u32>) -> Result<dto::Book, ApiError> {
        self.either(|c| c.show(key, version), |l| l.show(key, version))
    }

    fn remove(&mut self, key: &str) -> Result<dto::Book, ApiError> {
        self.either(|c| c.remove(key), |l| l.remove(key))
    }

    fn proof(
        &mut self,
        key: &str,
        index: u64,
        version: Option<u32>,
    ) -> Result<dto::Proof, ApiError> {
        self.either(
            |c| c.proof(key, index, version),
            |l| l.proof(key, index, version),
        )
    }

    fn verify(&mut self, key: &str, version: Option<u32>) -> Result<dto::Verified, ApiError> {
        self.either(|c| c.verify(key, version), |l| l.verify(key, version))
    }

    fn search(&mut self, req: &SearchRequest) -> Result<dto::Hits, ApiError> {
        self.either(|c| c.search(req), |l| l.search(req))
    }

    fn shards(&mut self) -> Result<dto::ShardList, ApiError> {
        self.either(Client::shards, LocalBooks::shards)
    }

    fn compact(&mut self, shard: Option<&str>) -> Result<dto::Compacted, ApiError> {
        self.either(|c| c.compact(shard), |l| l.compact(shard))
    }

    fn audit(&mut self) -> Result<dto::AuditReport, ApiError> {
        self.either(Client::audit, LocalBooks::audit)
    }
}

/// A request's answer from the daemon, or, when the daemon stopped before
/// the request reached it, `local`'s: done in this process instead, as
/// when no daemon runs.
pub fn or_local<T>(
    answered: Result<T, ApiError>,
    local: impl FnOnce() -> Result<T, ApiError>,
) -> Result<T, ApiError> {
    match answered {
        Err(e) if e.kind == ErrorKind::NotSent => {
            tracing::info!(error = %e, "the daemon is gone; doing it in this process");
            local()
        }
        answered => answered,
    }
}
