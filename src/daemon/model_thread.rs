//! The node's model on its own thread: opened on first use (a node that
//! only holds books and votes never loads it), then shared one call at a
//! time by the turns this node speaks and the summaries it narrates as a
//! moot's host.

use std::path::PathBuf;

use tokio::sync::{mpsc, oneshot};

use crate::model::{ChatModel, ModelError, ModelSettings};

type Job = Box<dyn FnOnce(Result<&mut dyn ChatModel, &ModelError>) + Send>;

/// A handle to the model thread; cheap to clone.
#[derive(Clone)]
pub struct ModelThread {
    jobs: mpsc::Sender<Job>,
}

impl ModelThread {
    pub fn spawn(settings: ModelSettings, state_dir: PathBuf) -> std::io::Result<ModelThread> {
        let (jobs, mut queue) = mpsc::channel::<Job>(16);
        std::thread::Builder::new()
            .name("grove-model".into())
            .spawn(move || {
                let mut model: Option<Result<Box<dyn ChatModel + Send>, ModelError>> = None;
                while let Some(job) = queue.blocking_recv() {
                    let opened = model
                        .get_or_insert_with(|| crate::model::open_model(&settings, &state_dir));
                    match opened {
                        Ok(m) => job(Ok(m.as_mut())),
                        Err(e) => {
                            job(Err(e));
                            // Try again on the next job (the operator may
                            // have installed the model meanwhile).
                            model = None;
                        }
                    }
                }
            })?;
        Ok(ModelThread { jobs })
    }

    /// A job running `f` with the model and its answer channel.
    fn job<R: Send + 'static>(
        f: impl FnOnce(&mut dyn ChatModel) -> R + Send + 'static,
    ) -> (Job, oneshot::Receiver<Result<R, ModelError>>) {
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(move |model| {
            let _ = reply.send(match model {
                Ok(m) => Ok(f(m)),
                Err(e) => Err(ModelError::Failed(format!("cannot open the model: {e}"))),
            });
        });
        (job, answer)
    }

    fn stopped() -> ModelError {
        ModelError::Failed("the model thread has stopped".into())
    }

    /// Runs `f` with the model (blocking caller: not on the async runtime).
    pub fn call_blocking<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut dyn ChatModel) -> R + Send + 'static,
    ) -> Result<R, ModelError> {
        let (job, answer) = Self::job(f);
        self.jobs.blocking_send(job).map_err(|_| Self::stopped())?;
        answer.blocking_recv().map_err(|_| Self::stopped())?
    }

    /// Runs `f` with the model from async code.
    pub async fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut dyn ChatModel) -> R + Send + 'static,
    ) -> Result<R, ModelError> {
        let (job, answer) = Self::job(f);
        self.jobs.send(job).await.map_err(|_| Self::stopped())?;
        answer.await.map_err(|_| Self::stopped())?
    }
}

/// The model thread as a [`ChatModel`] (for the host's narrator, which runs
/// on a blocking thread).
pub struct ThreadModel {
    pub thread: ModelThread,
    pub description: String,
}

impl ChatModel for ThreadModel {
    fn complete(&mut self, request: &crate::model::ChatRequest) -> Result<String, ModelError> {
        let request = request.clone();
        self.thread.call_blocking(move |m| m.complete(&request))?
    }

    fn describe(&self) -> String {
        self.description.clone()
    }
}
