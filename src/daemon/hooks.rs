//! `[hooks]`: runs the operator's program on chosen membership events, with
//! the event in `GROVE_EVENT*` environment variables. Each run is bounded
//! in time (`hooks.timeout_secs`, then killed) and in number
//! (`hooks.max_running`; an event beyond that is logged and skipped), and
//! logged with its exit status and the first line of its output. The
//! runner is a watcher like any other: it never holds up the node.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::sync::Semaphore;

use super::events::{Events, Next};
use crate::api::dto::MeshEvent;
use crate::config::HookSettings;

/// Output kept from one run for the log.
const MAX_OUTPUT: usize = 4096;

/// Starts the hook runner when `hooks.program` is set; it ends when the
/// events close (the node stops).
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
        loop {
            match sub.next().await {
                Next::Event(e) => {
                    if !settings.events.is_empty() && !settings.events.contains(&e.event) {
                        continue;
                    }
                    let Ok(permit) = running.clone().try_acquire_owned() else {
                        tracing::warn!(event = %e.event, detail = %e.detail, max_running = settings.max_running,
                            "hook skipped: hooks.max_running runs are still going");
                        continue;
                    };
                    let settings = settings.clone();
                    tokio::spawn(async move {
                        run_one(&settings, &e).await;
                        drop(permit);
                    });
                }
                Next::Lagged(n) => {
                    tracing::warn!(missed = n, "hook runner fell behind; events skipped")
                }
                Next::Closed => return,
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

async fn run_one(settings: &HookSettings, e: &MeshEvent) {
    let Some(program) = &settings.program else {
        return;
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
            tracing::warn!(program = %program.display(), event = %e.event, error = %err, "hook did not start");
            return;
        }
    };
    let group = child.id().and_then(|p| i32::try_from(p).ok());
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    let read = async {
        let mut buf = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.take(MAX_OUTPUT as u64).read_to_end(&mut buf).await;
        }
        if let Some(e) = err.as_mut() {
            let _ = e.take(MAX_OUTPUT as u64).read_to_end(&mut buf).await;
        }
        (buf, child.wait().await)
    };
    let limit = Duration::from_secs(settings.timeout_secs);
    match tokio::time::timeout(limit, read).await {
        Ok((output, Ok(status))) => {
            let text = String::from_utf8_lossy(&output);
            let first = text.lines().next().unwrap_or("");
            if status.success() {
                tracing::info!(program = %program.display(), event = %e.event, output = first, "hook ran");
            } else {
                tracing::warn!(program = %program.display(), event = %e.event, %status, output = first, "hook failed");
            }
        }
        Ok((_, Err(err))) => {
            tracing::warn!(program = %program.display(), event = %e.event, error = %err, "hook: waiting for it failed")
        }
        Err(_) => {
            if let Some(pgid) = group {
                // SAFETY: signals the process group this run created (its
                // leader is our child, not yet reaped, so the id is ours).
                unsafe { libc::kill(-pgid, libc::SIGKILL) };
            }
            tracing::warn!(program = %program.display(), event = %e.event,
                timeout_secs = settings.timeout_secs, "hook killed: it ran past hooks.timeout_secs")
        }
    }
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
        run_one(&settings, &event()).await;
        assert!(start.elapsed() < Duration::from_secs(10), "not cut off");
        // Killed: it never got past its sleep.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let text = std::fs::read_to_string(&out).unwrap();
        assert_eq!(text, "joined 2 carol\n");
    }

    #[test]
    fn hook_settings_name_the_bad_key() {
        let bad = HookSettings {
            events: vec!["joinde".into()],
            ..HookSettings::default()
        };
        let (key, why) = bad.validate().unwrap_err();
        assert_eq!(key, "events");
        assert!(why.contains("joined"), "{why}");
        let relative = HookSettings {
            program: Some("hook.sh".into()),
            ..HookSettings::default()
        };
        assert_eq!(relative.validate().unwrap_err().0, "program");
        assert_eq!(HookSettings::default().validate(), Ok(()));
    }
}
