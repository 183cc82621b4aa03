//! `[hooks]`: runs the operator's program on chosen membership events, with
//! the event in `GROVE_EVENT*` environment variables. Each run is bounded
//! in time (`hooks.timeout_secs`, then its whole process group is killed)
//! and in number (`hooks.max_running`; an event beyond that is logged and
//! skipped), and logged with how it ended (exited with a code, timed out,
//! or killed at shutdown) and the first line of its stdout and stderr. Both
//! pipes are drained at once and only a bounded part kept, so a hook never
//! blocks on its own output. The runner is a watcher like any other: it
//! never holds up the node.

use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;

use super::events::{Events, Next};
use crate::api::dto::{Event, MeshEvent};
use crate::config::HookSettings;

/// Output kept from each of a run's stdout and stderr for the log; the
/// rest is read and dropped.
const MAX_OUTPUT: usize = 4096;
/// How long output is still read once a run is over (a process outside
/// its group may hold the pipes open).
const OUTPUT_GRACE: Duration = Duration::from_millis(200);
/// How often a run whose program exited checks whether the processes it
/// started in the background have ended.
const GROUP_POLL: Duration = Duration::from_millis(100);
/// How long the runner waits at shutdown for its runs to be killed and
/// logged (within the daemon's 2 s for the hook runner).
const SHUTDOWN_WAIT: Duration = Duration::from_millis(1500);

/// Starts the hook runner when `hooks.program` is set; it ends when the
/// events close (the node stops), after killing the runs still going.
pub fn spawn(settings: &HookSettings, events: &Events) -> Option<tokio::task::JoinHandle<()>> {
    let program = settings.program.clone()?;
    let settings = HookSettings {
        program: Some(program),
        ..settings.clone()
    };
    let mut sub = events.subscribe();
    Some(tokio::spawn(async move {
        let running = Arc::new(Semaphore::new(settings.max_running));
        let settings = Arc::new(settings);
        let (stopping, stop) = watch::channel(false);
        loop {
            match sub.next().await {
                Next::Event(e) => {
                    // Hooks run on membership events only.
                    let Event::Mesh(e) = &*e else { continue };
                    if !settings.events.is_empty() && !settings.events.contains(&e.event) {
                        continue;
                    }
                    let Ok(permit) = running.clone().try_acquire_owned() else {
                        tracing::warn!(event = %e.event, detail = ?e.detail, max_running = settings.max_running,
                            "hook skipped: hooks.max_running runs are still going");
                        continue;
                    };
                    let (settings, stop, e) = (settings.clone(), stop.clone(), e.clone());
                    tokio::spawn(async move {
                        let run = run_one(&settings, &e, stop).await;
                        // The slot is free only once nothing of the run is left.
                        drop(permit);
                        run.log(&settings, &e);
                    });
                }
                Next::Lagged(n) => {
                    tracing::warn!(missed = n, "hook runner fell behind; events skipped")
                }
                Next::Closed => {
                    stopping.send_replace(true);
                    let all = u32::try_from(settings.max_running).unwrap_or(u32::MAX);
                    if tokio::time::timeout(SHUTDOWN_WAIT, running.acquire_many(all))
                        .await
                        .is_err()
                    {
                        tracing::warn!("hook runs still ending at shutdown");
                    }
                    return;
                }
            }
        }
    }))
}

/// The environment a hook sees for `e` (besides the daemon's own).
pub fn environment(e: &MeshEvent) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("GROVE_EVENT", e.event.clone()),
        ("GROVE_EVENT_AT", e.at.to_string()),
        ("GROVE_EVENT_EPOCH", e.epoch.to_string()),
        ("GROVE_EVENT_DETAIL", e.detail.clone()),
        (
            "GROVE_EVENT_JSON",
            serde_json::to_string(e).unwrap_or_default(),
        ),
    ];
    let optional = [
        ("GROVE_EVENT_PROPOSAL", e.proposal.clone()),
        ("GROVE_EVENT_KIND", e.kind.clone()),
        ("GROVE_EVENT_TARGET", e.target.clone()),
        ("GROVE_EVENT_PEER", e.peer.clone()),
        ("GROVE_EVENT_NAME", e.name.clone()),
        (
            "GROVE_EVENT_YES",
            e.yes.map(|y| if y { "yes" } else { "no" }.to_string()),
        ),
    ];
    env.extend(optional.into_iter().filter_map(|(k, v)| Some((k, v?))));
    env
}

/// How a run's program ended.
#[derive(Debug)]
enum Ended {
    Exited(ExitStatus),
    /// Killed (with its process group) at `hooks.timeout_secs`.
    TimedOut,
    /// Killed (with its process group) because the node is stopping.
    Shutdown,
    /// It could not be started, or waited for.
    Failed(String),
}

/// What happened to the processes a run's program left running after it
/// exited (`cmd &`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leftovers {
    None,
    /// They ended by themselves before the time limit.
    Ended,
    KilledAtTimeout,
    KilledAtShutdown,
}

/// One pipe's output: its first [`MAX_OUTPUT`] bytes and how many came.
#[derive(Debug, Default)]
struct Captured {
    kept: Vec<u8>,
    total: u64,
}

impl Captured {
    /// The first line, escaped: hook output must not forge log lines.
    fn first_line(&self) -> String {
        let text = String::from_utf8_lossy(&self.kept);
        text.lines().next().unwrap_or("").escape_debug().to_string()
    }
}

/// A finished run, for the log.
#[derive(Debug)]
struct Run {
    ended: Ended,
    leftovers: Leftovers,
    stdout: Captured,
    stderr: Captured,
}

impl Run {
    fn log(&self, settings: &HookSettings, e: &MeshEvent) {
        let program = settings
            .program
            .as_deref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let (stdout, stderr) = (self.stdout.first_line(), self.stderr.first_line());
        let (out_bytes, err_bytes) = (self.stdout.total, self.stderr.total);
        let left = match self.leftovers {
            Leftovers::None => "",
            Leftovers::Ended => "processes it started in the background ended by themselves",
            Leftovers::KilledAtTimeout => {
                "processes it started in the background were killed at hooks.timeout_secs"
            }
            Leftovers::KilledAtShutdown => {
                "processes it started in the background were killed at shutdown"
            }
        };
        let (quiet, what) = match &self.ended {
            Ended::Exited(status) => {
                let clean = status.success()
                    && matches!(self.leftovers, Leftovers::None | Leftovers::Ended);
                let verb = if clean { "hook ran" } else { "hook failed" };
                (clean, format!("{verb}: {}", describe(status)))
            }
            Ended::TimedOut => (
                false,
                format!(
                    "hook killed: it ran past hooks.timeout_secs ({} s)",
                    settings.timeout_secs
                ),
            ),
            Ended::Shutdown => (
                false,
                "hook killed at shutdown: the node is stopping".into(),
            ),
            Ended::Failed(error) => (false, format!("hook did not run: {error}")),
        };
        if quiet {
            tracing::info!(%program, event = %e.event, left, stdout, stderr, out_bytes, err_bytes, "{what}");
        } else {
            tracing::warn!(%program, event = %e.event, left, stdout, stderr, out_bytes, err_bytes, "{what}");
        }
    }
}

/// "exited with code N" or "killed by signal N".
fn describe(status: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}

/// Reads a pipe to its end into `into`, keeping the first [`MAX_OUTPUT`]
/// bytes (shared, so what came is kept even if the pipe never closes).
async fn capture(pipe: Option<impl AsyncRead + Unpin>, into: Arc<Mutex<Captured>>) {
    let Some(mut pipe) = pipe else {
        return;
    };
    let mut buf = vec![0u8; 8192];
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let mut captured = into.lock().unwrap_or_else(|e| e.into_inner());
        captured.total += n as u64;
        let room = MAX_OUTPUT.saturating_sub(captured.kept.len());
        captured.kept.extend_from_slice(&buf[..n.min(room)]);
    }
}

/// SIGKILL to the run's whole process group.
fn kill_group(pgid: i32) {
    // SAFETY: signals a process group this run created (its id is the
    // leader's pid, which the kernel does not hand out again while any
    // process of the group lives).
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
}

/// Whether any process of the group is still alive (signal 0 checks only).
fn group_alive(pgid: i32) -> bool {
    // SAFETY: signal 0 delivers nothing; it only checks for the group.
    unsafe { libc::kill(-pgid, 0) == 0 }
}

/// Runs the hook once for `e` until its program exits (then until what it
/// left in the background ends), `hooks.timeout_secs` passes, or `stop`
/// turns true; at the last two its whole process group is killed.
async fn run_one(settings: &HookSettings, e: &MeshEvent, mut stop: watch::Receiver<bool>) -> Run {
    let mut run = Run {
        ended: Ended::Failed(String::new()),
        leftovers: Leftovers::None,
        stdout: Captured::default(),
        stderr: Captured::default(),
    };
    let Some(program) = &settings.program else {
        run.ended = Ended::Failed("no hooks.program".into());
        return run;
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(&settings.args)
        .envs(environment(e))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so a run past its time is killed with
        // everything it started.
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(err) => {
            run.ended = Ended::Failed(err.to_string());
            return run;
        }
    };
    let group = child.id().and_then(|p| i32::try_from(p).ok());
    let (out, err) = (Arc::default(), Arc::default());
    let stdout = tokio::spawn(capture(child.stdout.take(), Arc::clone(&out)));
    let stderr = tokio::spawn(capture(child.stderr.take(), Arc::clone(&err)));
    let deadline = Instant::now() + Duration::from_secs(settings.timeout_secs);
    run.ended = tokio::select! {
        status = child.wait() => match status {
            Ok(s) => Ended::Exited(s),
            Err(err) => Ended::Failed(format!("waiting for it: {err}")),
        },
        _ = tokio::time::sleep_until(deadline) => Ended::TimedOut,
        _ = stop.wait_for(|s| *s) => Ended::Shutdown,
    };
    if let Some(pgid) = group {
        if matches!(run.ended, Ended::TimedOut | Ended::Shutdown) {
            // The leader is not reaped yet, so the group id is still ours.
            kill_group(pgid);
            let _ = child.wait().await;
        } else if group_alive(pgid) {
            run.leftovers = loop {
                tokio::select! {
                    _ = tokio::time::sleep(GROUP_POLL) => {
                        if !group_alive(pgid) {
                            break Leftovers::Ended;
                        }
                    }
                    _ = tokio::time::sleep_until(deadline) => {
                        kill_group(pgid);
                        break Leftovers::KilledAtTimeout;
                    }
                    _ = stop.wait_for(|s| *s) => {
                        kill_group(pgid);
                        break Leftovers::KilledAtShutdown;
                    }
                }
            };
        }
    }
    run.stdout = finish(stdout, out).await;
    run.stderr = finish(stderr, err).await;
    run
}

/// A capture's output, once its pipe closed or [`OUTPUT_GRACE`] passed.
async fn finish(task: tokio::task::JoinHandle<()>, captured: Arc<Mutex<Captured>>) -> Captured {
    let abort = task.abort_handle();
    if tokio::time::timeout(OUTPUT_GRACE, task).await.is_err() {
        abort.abort();
    }
    std::mem::take(&mut *captured.lock().unwrap_or_else(|e| e.into_inner()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> MeshEvent {
        MeshEvent {
            event: "joined".into(),
            at: 1,
            epoch: 2,
            proposal: None,
            kind: None,
            target: None,
            peer: Some("12D3KooWpeer".into()),
            name: Some("carol".into()),
            yes: None,
            detail: "carol joined".into(),
        }
    }

    #[tokio::test]
    async fn a_hook_past_its_time_limit_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let settings = HookSettings {
            program: Some("/bin/sh".into()),
            args: vec![
                "-c".into(),
                format!(
                    "echo \"$GROVE_EVENT $GROVE_EVENT_EPOCH $GROVE_EVENT_NAME\" > {}; sleep 30; echo late >> {}",
                    out.display(),
                    out.display()
                ),
            ],
            timeout_secs: 1,
            ..HookSettings::default()
        };
        let start = std::time::Instant::now();
        let (_stopping, stop) = watch::channel(false);
        let run = run_one(&settings, &event(), stop).await;
        assert!(matches!(run.ended, Ended::TimedOut), "{run:?}");
        assert!(start.elapsed() < Duration::from_secs(10), "not cut off");
        // Killed: it never got past its sleep.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let text = std::fs::read_to_string(&out).unwrap();
        assert_eq!(text, "joined 2 carol\n");
    }

    /// Waits (a little: its new parent reaps it) for the process whose pid
    /// is in `pid_file` to be gone.
    async fn gone(pid_file: &std::path::Path) {
        let pid: i32 = std::fs::read_to_string(pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        for _ in 0..50 {
            // Killed and not yet reaped (a zombie) counts as gone.
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = state
                .rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'));
            if state.is_empty() || zombie {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("process {pid}, started in the background by a hook, survived");
    }

    fn shell(script: &str, timeout_secs: u64) -> HookSettings {
        HookSettings {
            program: Some("/bin/sh".into()),
            args: vec!["-c".into(), script.into()],
            timeout_secs,
            ..HookSettings::default()
        }
    }

    #[tokio::test]
    async fn a_hook_with_a_megabyte_on_each_pipe_exits_on_its_own() {
        let settings = shell(
            "head -c 1000000 /dev/zero | tr '\\0' o; head -c 1000000 /dev/zero | tr '\\0' e >&2; exit 3",
            30,
        );
        let (_stopping, stop) = watch::channel(false);
        let start = std::time::Instant::now();
        let run = run_one(&settings, &event(), stop).await;
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "blocked on its output"
        );
        let Ended::Exited(status) = &run.ended else {
            panic!("{run:?}")
        };
        assert_eq!(describe(status), "exited with code 3");
        assert_eq!((run.stdout.total, run.stderr.total), (1_000_000, 1_000_000));
        assert_eq!(run.stdout.kept.len(), MAX_OUTPUT);
    }

    #[tokio::test]
    async fn what_a_hook_leaves_running_is_killed_at_its_time_limit_and_at_shutdown() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!(
            "sleep 1000 & echo $! > {}; echo started",
            pid_file.display()
        );
        let (_stopping, stop) = watch::channel(false);
        let run = run_one(&shell(&script, 1), &event(), stop).await;
        assert!(
            matches!(&run.ended, Ended::Exited(s) if s.success()),
            "{run:?}"
        );
        assert_eq!(run.leftovers, Leftovers::KilledAtTimeout);
        assert_eq!(run.stdout.first_line(), "started");
        gone(&pid_file).await;

        let (stopping, stop) = watch::channel(false);
        let running = tokio::spawn({
            let settings = shell(&script, 600);
            async move { run_one(&settings, &event(), stop).await }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        stopping.send_replace(true);
        let run = tokio::time::timeout(Duration::from_secs(5), running)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(run.leftovers, Leftovers::KilledAtShutdown);
        gone(&pid_file).await;
    }

    #[test]
    fn hook_settings_name_the_bad_key() {
        let bad = HookSettings {
            events: vec!["joinde".into()],
            ..HookSettings::default()
        };
        let e = bad.validate().unwrap_err();
        assert_eq!(e.key, "hooks.events");
        assert!(e.reason.contains("joined"), "{}", e.reason);
        let relative = HookSettings {
            program: Some("hook.sh".into()),
            ..HookSettings::default()
        };
        assert_eq!(relative.validate().unwrap_err().key, "hooks.program");
        assert_eq!(HookSettings::default().validate(), Ok(()));
    }
}
