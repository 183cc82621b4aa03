//! The model worker: the node's model on its own thread, opened on first
//! use (a node that only holds books and votes never loads it), then shared
//! one call at a time by the turns this node speaks and the summaries it
//! narrates as a moot's host. Every completion through it is counted in the
//! node's [`Stats`] (tokens and seconds, `grove_model_*` in `/metrics`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use super::stats::Stats;
use super::worker::Worker;
use crate::model::{ChatModel, ChatRequest, Completion, ModelError, ModelSettings};

/// The open model with the node's counters: each completion's tokens and
/// time are counted as it returns.
struct Counted {
    model: Box<dyn ChatModel + Send>,
    stats: Arc<Stats>,
}

impl ChatModel for Counted {
    fn complete(&mut self, request: &ChatRequest) -> Result<String, ModelError> {
        self.complete_with_usage(request).map(|c| c.text)
    }

    fn complete_with_usage(&mut self, request: &ChatRequest) -> Result<Completion, ModelError> {
        let started = Instant::now();
        let result = self.model.complete_with_usage(request);
        let usage = result.as_ref().ok().and_then(|c| c.usage.as_ref());
        self.stats
            .model_completion(started.elapsed(), result.is_ok(), usage);
        result
    }

    fn describe(&self) -> String {
        self.model.describe()
    }

    fn guides_decoding(&self) -> bool {
        self.model.guides_decoding()
    }
}

/// The model, opened on the first job that needs it.
pub struct LazyModel {
    settings: ModelSettings,
    state_dir: PathBuf,
    stats: Arc<Stats>,
    model: Option<Counted>,
}

impl LazyModel {
    /// The open model; a model that fails to open is tried again on the
    /// next job (the operator may have installed it meanwhile).
    fn get(&mut self) -> Result<&mut dyn ChatModel, ModelError> {
        let model = match self.model.take() {
            Some(open) => open,
            None => Counted {
                model: crate::model::open_model(&self.settings, &self.state_dir)
                    .map_err(|e| ModelError::Failed(format!("cannot open the model: {e}")))?,
                stats: self.stats.clone(),
            },
        };
        Ok(self.model.insert(model))
    }
}

/// A handle to the model worker; cheap to clone.
#[derive(Clone)]
pub struct ModelWorker {
    worker: Worker<LazyModel>,
}

fn stopped() -> ModelError {
    ModelError::Failed("the model worker has stopped".into())
}

impl ModelWorker {
    pub fn spawn(
        settings: ModelSettings,
        state_dir: PathBuf,
        stats: Arc<Stats>,
    ) -> std::io::Result<(ModelWorker, std::thread::JoinHandle<()>)> {
        let lazy = LazyModel {
            settings,
            state_dir,
            stats,
            model: None,
        };
        let (worker, thread) = Worker::spawn("model", 16, lazy, |_| {})?;
        Ok((ModelWorker { worker }, thread))
    }

    /// Runs `f` with the model (blocking caller: not on the async runtime).
    pub fn call_blocking<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut dyn ChatModel) -> R + Send + 'static,
    ) -> Result<R, ModelError> {
        self.worker
            .call_blocking(move |lazy| lazy.get().map(f))
            .map_err(|_| stopped())?
    }

    /// Runs `f` with the model from async code.
    pub async fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut dyn ChatModel) -> R + Send + 'static,
    ) -> Result<R, ModelError> {
        self.worker
            .call(move |lazy| lazy.get().map(f))
            .await
            .map_err(|_| stopped())?
    }

    pub fn is_alive(&self) -> bool {
        self.worker.is_alive()
    }

    pub async fn inject_panic(&self) {
        self.worker.inject_panic().await
    }
}

/// The model worker as a [`ChatModel`] (for the host's narrator, which runs
/// on a blocking thread).
pub struct WorkerModel {
    pub worker: ModelWorker,
    pub description: String,
}

impl ChatModel for WorkerModel {
    fn complete(&mut self, request: &ChatRequest) -> Result<String, ModelError> {
        let request = request.clone();
        self.worker.call_blocking(move |m| m.complete(&request))?
    }

    fn complete_with_usage(&mut self, request: &ChatRequest) -> Result<Completion, ModelError> {
        let request = request.clone();
        self.worker
            .call_blocking(move |m| m.complete_with_usage(&request))?
    }

    fn describe(&self) -> String {
        self.description.clone()
    }
}
