//! `grove config check` and the CLI's control-socket lookup: the effective
//! configuration is validated without starting anything, and every problem
//! names its file, key or variable.

use crate::support::{Grove, grove_cmd};

fn check(file: &std::path::Path, env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = grove_cmd();
    cmd.args(["config", "check", "--config"]).arg(file);
    cmd.envs(env.iter().copied());
    cmd.output().unwrap()
}

#[test]
fn a_good_file_is_printed_with_every_key() {
    let g = Grove::new();
    let file = g.write(
        "grove.toml",
        b"[node]\nname = \"alice\"\n[net]\nmax_connections = 64\n",
    );
    let out = check(&file, &[("GROVE_LOG__LEVEL", "debug")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("config file: {}", file.display())),
        "{text}"
    );
    assert!(text.contains("environment: GROVE_LOG__LEVEL"), "{text}");
    assert!(text.contains("node.name = \"alice\""), "{text}");
    assert!(text.contains("net.max_connections = 64"), "{text}");
    assert!(text.contains("log.level = \"debug\""), "{text}");
    // Defaults fill every other key.
    assert!(text.contains("net.turn_timeout_secs = 600"), "{text}");
    let mut cmd = grove_cmd();
    cmd.args(["config", "check", "--json", "--config"])
        .arg(&file);
    let json: serde_json::Value = serde_json::from_slice(&cmd.output().unwrap().stdout).unwrap();
    assert_eq!(json["ok"], true);
    assert_eq!(json["settings"]["node"]["name"], "alice");
    assert_eq!(json["settings"]["net"]["max_connections"], 64);
}

#[test]
fn an_unknown_key_a_wrong_type_and_an_unknown_variable_are_named() {
    let g = Grove::new();
    let unknown = g.write("unknown.toml", b"[net]\nnope = 1\n");
    let out = check(&unknown, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(&unknown.display().to_string()) && err.contains("unknown field `nope`"),
        "{err}"
    );
    let wrong = g.write("wrong.toml", b"[net]\nmax_connections = \"lots\"\n");
    let out = check(&wrong, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(&wrong.display().to_string()) && err.contains("net.max_connections"),
        "{err}"
    );
    let good = g.write("good.toml", b"");
    let out = check(&good, &[("GROVE_NOPE", "1")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("GROVE_NOPE is not a config key"), "{err}");
    // A value the checked settings refuse names its key.
    let zero = g.write("zero.toml", b"[net]\nmax_connections = 0\n");
    let err = String::from_utf8_lossy(&check(&zero, &[]).stderr).into_owned();
    assert!(err.contains("`net.max_connections`"), "{err}");
}

/// `--socket` points every command at a daemon's control socket, and a
/// daemon started with it binds there.
#[test]
fn the_socket_flag_names_the_daemon_socket() {
    let (a, b) = (Grove::new(), Grove::new());
    let socket = a.dir.path().join("elsewhere.sock");
    let flag = socket.to_str().unwrap();
    let err = b.fails(&["--socket", flag, "node", "status"]);
    assert!(err.contains(flag), "{err}");
    let mut node = a
        .cmd(&[
            "--socket",
            flag,
            "node",
            "run",
            "--listen",
            "/ip4/127.0.0.1/tcp/0",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !socket.exists() && started.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Another state directory, the same socket: the answer is a's node.
    let status = b.json(&["--socket", flag, "node", "status"]);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(node.id() as i32, libc::SIGTERM) };
    let _ = node.wait();
    assert_eq!(
        status["state_dir"].as_str(),
        Some(a.state().to_str().unwrap())
    );
    assert!(!b.state().join("grove.sock").exists());
}

/// One file-mode policy for the state directory: keys and every database
/// are private to the node's user (0600); a backup by another user is
/// refused before anything is written, saying who can take it.
#[test]
fn state_files_are_private_and_a_backup_says_who_can_take_it() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let g = Grove::new();
    let book = g.write(
        "t.txt",
        crate::support::generated_book("Modes", "M", 3, 30, 2).as_bytes(),
    );
    g.ok(&["book", "add", book.to_str().unwrap()]);
    g.ok(&["mesh", "init", "--name", "modes"]);
    let mode = |rel: &str| {
        std::fs::metadata(g.state().join(rel))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("shards/main.db"), 0o600, "a shard is private");
    assert_eq!(mode("mesh.db"), 0o600, "mesh.db is private");
    // The node's own database, created by the daemon.
    let mut node = g
        .cmd(&["node", "run", "--listen", "/ip4/127.0.0.1/tcp/0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !g.state().join("grove.sock").exists() && started.elapsed().as_secs() < 30 {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(node.id() as i32, libc::SIGTERM) };
    let _ = node.wait();
    assert_eq!(mode("node.db"), 0o600, "node.db is private");
    // Another user (nobody) may enter the directories but read nothing.
    if unsafe { libc::geteuid() } != 0 {
        crate::support::skip("dropping to another user needs root");
        return;
    }
    for dir in [g.dir.path().to_path_buf(), g.state()] {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out_dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(out_dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let dest = out_dir.path().join("backup");
    let mut cmd = g.cmd(&["backup", dest.to_str().unwrap()]);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("private to its user") && err.contains("sudo grove backup"),
        "{err}"
    );
    assert!(!dest.exists(), "nothing is written");
}
