//! The store worker: the one thread that opens the state directory's shards
//! while a daemon runs, so every book operation (the control socket's, a
//! peer's search, a turn's retrieval) runs on a single writer, in order.

use super::worker::{Stopped, Worker};
use crate::books::LocalBooks;

/// A handle to the store worker; cheap to clone.
#[derive(Clone)]
pub struct StoreWorker {
    worker: Worker<LocalBooks>,
}

impl StoreWorker {
    /// Starts the thread; it ends when every handle is dropped, after
    /// finishing the jobs already queued.
    pub fn spawn(books: LocalBooks) -> std::io::Result<(StoreWorker, std::thread::JoinHandle<()>)> {
        let (worker, thread) = Worker::spawn("store", 64, books, |_| {})?;
        Ok((StoreWorker { worker }, thread))
    }

    /// Runs `f` on the store thread and waits for its answer.
    pub async fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut LocalBooks) -> R + Send + 'static,
    ) -> Result<R, Stopped> {
        self.worker.call(move |books| f(books)).await
    }

    pub fn is_alive(&self) -> bool {
        self.worker.is_alive()
    }

    pub async fn inject_panic(&self) {
        self.worker.inject_panic().await
    }
}

/// The store worker as `moot verify`'s check of passages against stored
/// chunks, for a check running on a blocking thread: each lookup is one
/// job on the worker, so the check reads the shards the worker keeps open
/// and holds the worker no longer than a lookup.
pub struct WorkerChunks {
    pub store: StoreWorker,
    pub rt: tokio::runtime::Handle,
}

impl crate::moot::verify::ChunkLookup for WorkerChunks {
    fn chunk_text(
        &mut self,
        key: &str,
        index: u64,
    ) -> Result<Option<String>, crate::moot::verify::LookupError> {
        let key = key.to_string();
        self.rt
            .block_on(self.store.call(move |b| b.store().chunk_text(&key, index)))?
    }
}

impl From<Stopped> for crate::api::ApiError {
    fn from(_: Stopped) -> Self {
        crate::api::ApiError::unavailable("the node is shutting down")
    }
}
