//! One thread actor, used for every resource the daemon must touch from a
//! single thread: the store (the shards' one writer), the mesh state
//! (`mesh.db`, one transaction per step) and the model (one call at a
//! time). A handle sends jobs over a bounded channel, each with its own
//! oneshot reply; the thread runs them in order on the state it owns and
//! ends, after the jobs already queued, when the last handle is dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{mpsc, oneshot};

/// A worker that can no longer answer: it was stopped, or a job panicked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the {name} worker has stopped")]
pub struct Stopped {
    pub name: &'static str,
}

type Job<S> = Box<dyn FnOnce(&mut S) + Send>;

/// A handle to one worker thread; cheap to clone.
pub struct Worker<S> {
    name: &'static str,
    jobs: mpsc::Sender<Job<S>>,
    panicked: Arc<AtomicBool>,
}

impl<S> Clone for Worker<S> {
    fn clone(&self) -> Self {
        Worker {
            name: self.name,
            jobs: self.jobs.clone(),
            panicked: self.panicked.clone(),
        }
    }
}

impl<S: Send + 'static> Worker<S> {
    /// Starts the thread `grove-<name>` owning `state`. `after_each` runs
    /// after every job (the mesh worker publishes its new state there).
    /// A job that panics ends the thread: later calls fail with [`Stopped`]
    /// and [`Worker::is_alive`] turns false, so the daemon can report it.
    pub fn spawn(
        name: &'static str,
        capacity: usize,
        state: S,
        mut after_each: impl FnMut(&mut S) + Send + 'static,
    ) -> std::io::Result<(Worker<S>, std::thread::JoinHandle<()>)> {
        let (jobs, mut queue) = mpsc::channel::<Job<S>>(capacity);
        let panicked = Arc::new(AtomicBool::new(false));
        let flag = panicked.clone();
        let thread = std::thread::Builder::new()
            .name(format!("grove-{name}"))
            .spawn(move || {
                let mut state = state;
                while let Some(job) = queue.blocking_recv() {
                    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        job(&mut state);
                        after_each(&mut state);
                    }));
                    if ran.is_err() {
                        flag.store(true, Ordering::SeqCst);
                        tracing::error!(worker = name, "a job panicked; the worker stops");
                        return;
                    }
                }
            })?;
        Ok((
            Worker {
                name,
                jobs,
                panicked,
            },
            thread,
        ))
    }

    fn job<R: Send + 'static>(
        f: impl FnOnce(&mut S) -> R + Send + 'static,
    ) -> (Job<S>, oneshot::Receiver<R>) {
        let (reply, answer) = oneshot::channel();
        let job: Job<S> = Box::new(move |state| {
            let _ = reply.send(f(state));
        });
        (job, answer)
    }

    fn stopped(&self) -> Stopped {
        Stopped { name: self.name }
    }

    /// A job dropped its reply unanswered: it panicked (the thread is
    /// ending), so the worker is dead from now on.
    fn died(&self) -> Stopped {
        self.panicked.store(true, Ordering::SeqCst);
        self.stopped()
    }

    /// Runs `f` on the worker's thread and waits for its answer.
    pub async fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut S) -> R + Send + 'static,
    ) -> Result<R, Stopped> {
        let (job, answer) = Self::job(f);
        self.jobs.send(job).await.map_err(|_| self.stopped())?;
        answer.await.map_err(|_| self.died())
    }

    /// [`Worker::call`] from a thread outside the async runtime.
    pub fn call_blocking<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut S) -> R + Send + 'static,
    ) -> Result<R, Stopped> {
        let (job, answer) = Self::job(f);
        self.jobs.blocking_send(job).map_err(|_| self.stopped())?;
        answer.blocking_recv().map_err(|_| self.died())
    }

    /// False once a job panicked (the thread has ended).
    pub fn is_alive(&self) -> bool {
        !self.panicked.load(Ordering::SeqCst) && !self.jobs.is_closed()
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Makes the worker's thread panic (the daemon's test-only fault
    /// switch, `GROVETEST_PANIC`): the health check must notice.
    pub async fn inject_panic(&self) {
        let name = self.name;
        let _ = self
            .call(move |_| -> () { panic!("fault injected into the {name} worker") })
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_run_in_order_and_a_panic_stops_the_worker() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (worker, thread) = Worker::spawn("test", 4, Vec::<u32>::new(), |_| {}).unwrap();
        rt.block_on(async {
            for i in 0..3 {
                worker.call(move |v| v.push(i)).await.unwrap();
            }
            assert_eq!(worker.call(|v| v.clone()).await.unwrap(), vec![0, 1, 2]);
            assert!(worker.is_alive());
            let failed = worker.call(|_| -> u32 { panic!("a test panic") }).await;
            assert_eq!(failed, Err(Stopped { name: "test" }));
        });
        assert!(!worker.is_alive());
        thread.join().unwrap();
    }
}
