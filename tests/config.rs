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
        err.contains(&unknown.display().to_string()) && err.contains("unknown key `net.nope`"),
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

// --- Hostile values (issue 27): every key read strictly, range-checked,
// and refused by its own name, the same by `config check` and a start.

/// Every config key with its default value, from the settings' own shape.
fn keys() -> Vec<(String, serde_json::Value)> {
    fn walk(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, serde_json::Value)>) {
        if let serde_json::Value::Object(map) = v {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                if v.is_object() {
                    walk(&key, v, out);
                } else {
                    out.push((key, v.clone()));
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(
        "",
        &serde_json::to_value(grove::config::Settings::default()).unwrap(),
        &mut out,
    );
    out
}

/// TOML values hostile to a key whose default is `default`: wrong kinds,
/// non-finite and extreme numbers, empty and odd text.
fn hostile_values(default: &serde_json::Value) -> Vec<String> {
    use serde_json::Value as J;
    let long = format!("\"{}\"", "x".repeat(10_000));
    let owned = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut values = match default {
        J::Bool(_) => owned(&["1", "0", "\"true\"", "nan", "false"]),
        J::Number(n) if n.is_f64() => {
            owned(&["nan", "inf", "-inf", "1e308", "-1", "\"0.5\"", "2.5"])
        }
        J::Number(_) => owned(&[
            "1e30",
            "inf",
            "-inf",
            "nan",
            "0.5",
            "-1",
            "true",
            "\"5\"",
            "0",
            "1",
            "9223372036854775807",
            "4294967296",
            "65537",
            "86401",
            "1979-05-27",
        ]),
        J::Array(_) => owned(&[
            "[]",
            "[\"\"]",
            "\"/ip4/127.0.0.1/tcp/0\"",
            "[1]",
            "[\"/ip4/127.0.0.1/udp/0/quic-v1\"]",
            "[\"/dns4/example.org/tcp/1\"]",
        ]),
        _ => owned(&[
            "\"\"",
            "\" \"",
            "5",
            "true",
            "\"inof\"",
            "\"x\\u0000y\"",
            "\"/nonexistent/x\"",
            "\"grove=debug\"",
            "\"\\u001b[31m\"",
        ]),
    };
    values.push(long);
    values
}

/// A config file setting `key` to `value` on a node that listens on a free
/// loopback port (unless `key` is the listen list itself).
fn hostile_file(key: &str, value: &str) -> String {
    let mut text = String::new();
    if key != "net.listen" {
        text.push_str("net.listen = [\"/ip4/127.0.0.1/tcp/0\"]\n");
    }
    text.push_str(&format!("{key} = {value}\n"));
    text
}

/// `grove config check` on `file`: its stderr when it refuses.
fn check_refusal(g: &Grove, file: &std::path::Path) -> Option<String> {
    let out = g
        .cmd(&["--config", file.to_str().unwrap(), "config", "check"])
        .current_dir(g.dir.path())
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(101), "config check panicked");
    (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `grove node run` on `file`: its stderr when the start fails; a start
/// that reports READY is stopped with SIGTERM and gives `None`.
fn start_refusal(g: &Grove, file: &std::path::Path) -> Option<String> {
    use std::io::Read;
    use std::os::unix::net::UnixDatagram;
    let notify_path = g.dir.path().join("notify.sock");
    let _ = std::fs::remove_file(&notify_path);
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(std::time::Duration::from_millis(200)))
        .unwrap();
    let mut child = g
        .cmd(&["--config", file.to_str().unwrap(), "node", "run"])
        .current_dir(g.dir.path())
        .env("NOTIFY_SOCKET", &notify_path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Drained at once, so a node that logs much never blocks on the pipe.
    let mut stderr = child.stderr.take().unwrap();
    let drain = std::thread::spawn(move || {
        let mut err = String::new();
        let _ = stderr.read_to_string(&mut err);
        err
    });
    let started = std::time::Instant::now();
    let mut buf = [0u8; 512];
    let refusal = loop {
        if let Some(status) = child.try_wait().unwrap() {
            let err = drain.join().unwrap();
            assert_ne!(status.code(), Some(101), "node run panicked: {err}");
            assert!(!status.success(), "node run ended by itself: {err}");
            break Some(err);
        }
        if let Ok(n) = notify.recv(&mut buf)
            && String::from_utf8_lossy(&buf[..n]).contains("READY=1")
        {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let status = child.wait().unwrap();
            assert!(status.success(), "a started node stops cleanly on SIGTERM");
            break None;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "node run neither started nor refused within 60 s"
        );
    };
    let _ = std::fs::remove_dir_all(g.state());
    refusal
}

/// The first line of an error (the start may log after it).
fn error_line(stderr: &str) -> String {
    stderr
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_default()
        .to_string()
}

/// A refusal names `key` (or, for a bound between two keys, the other key
/// and this one's name) and shows no long value whole.
fn assert_names(err: &str, key: &str) {
    let last = key.rsplit('.').next().unwrap();
    assert!(
        err.contains(&format!("`{key}`")) || err.contains(last),
        "the refusal does not name {key}: {err}"
    );
    assert!(
        err.len() < 600,
        "a long refusal ({} bytes): {err:.600}",
        err.len()
    );
}

mod hostile {
    use super::*;
    use proptest::prelude::*;

    fn case() -> impl Strategy<Value = (String, String)> {
        // Paths a start creates (the socket's directory) or a flag
        // overrides (the state directory) are left to the in-process test.
        let cases: Vec<(String, String)> = keys()
            .into_iter()
            .filter(|(key, _)| key != "control.socket" && key != "state_dir")
            .flat_map(|(key, default)| {
                hostile_values(&default)
                    .into_iter()
                    .map(move |v| (key.clone(), v))
            })
            .collect();
        proptest::sample::select(cases)
    }

    proptest! {
        // Each case runs the binary twice, and a start that is accepted
        // runs a node: few cases here, many in the in-process test below.
        #![proptest_config(ProptestConfig::with_cases(16))]

        /// `grove config check` and `grove node run` agree on every hostile
        /// value: both refuse it with the same error naming its key, or the
        /// check accepts it and the node starts and stops; neither panics.
        #[test]
        fn config_check_and_a_start_agree_on_hostile_values((key, value) in case()) {
            let g = Grove::new();
            let file = g.write("grove.toml", hostile_file(&key, &value).as_bytes());
            let checked = check_refusal(&g, &file);
            let started = start_refusal(&g, &file);
            match (&checked, &started) {
                (Some(c), Some(s)) => {
                    prop_assert_eq!(error_line(c), error_line(s), "{} = {:.100}", key, value);
                    assert_names(c, &key);
                }
                (None, None) => {}
                _ => prop_assert!(false, "{key} = {value:.100}: check {checked:?}, start {started:?}"),
            }
        }
    }

    /// Values a generator gives a key whose default is `default`, as TOML.
    fn any_value(default: &serde_json::Value) -> BoxedStrategy<String> {
        use serde_json::Value as J;
        let float = any::<f64>().prop_map(|f| {
            if f.is_nan() {
                "nan".to_string()
            } else if f.is_infinite() {
                if f > 0.0 { "inf" } else { "-inf" }.to_string()
            } else {
                format!("{f:?}")
            }
        });
        let text = ".{0,120}".prop_map(|s: String| {
            serde_json::to_string(&s)
                .unwrap()
                .replace('\u{7f}', "\\u007f")
        });
        let fixed = proptest::sample::select(hostile_values(default));
        match default {
            J::Number(n) if n.is_f64() => prop_oneof![fixed, float].boxed(),
            J::Number(_) => prop_oneof![
                fixed,
                any::<i64>().prop_map(|n| n.to_string()),
                (0i64..200_000).prop_map(|n| n.to_string()),
                float,
            ]
            .boxed(),
            J::Bool(_) => prop_oneof![fixed, any::<bool>().prop_map(|b| b.to_string())].boxed(),
            J::Array(_) => prop_oneof![
                fixed,
                proptest::collection::vec(text, 0..4).prop_map(|v| format!("[{}]", v.join(", "))),
            ]
            .boxed(),
            _ => prop_oneof![fixed, text].boxed(),
        }
    }

    fn any_case() -> impl Strategy<Value = (String, String)> {
        proptest::sample::select(keys())
            .prop_flat_map(|(key, default)| (Just(key), any_value(&default)))
    }

    /// The largest value an accepted key may hold, by its unit: no key
    /// saturates or takes a value its arithmetic cannot hold.
    fn largest(key: &str) -> Option<i64> {
        if key == "moot.seed" {
            None
        } else if key.ends_with("_secs") {
            Some(365 * 86_400)
        } else if key.ends_with("_ms") {
            Some(86_400_000)
        } else if key.ends_with("_bytes") {
            Some(1 << 40)
        } else {
            Some(100_000)
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        /// The check a start and `config check` run, fed any value for any
        /// key: a refusal names the key; an accepted value is the one
        /// written (no coercion), within bounds its arithmetic holds.
        #[test]
        fn every_key_is_read_strictly_and_bounded((key, value) in any_case()) {
            let text = hostile_file(&key, &value);
            let checked = grove::config::Settings::from_layers(Some((&text, "grove.toml")), vec![])
                .and_then(|s| s.check(Default::default()))
                .and_then(|config| config.check_start().map(|()| config));
            match checked {
                Err(e) => assert_names(&e.to_string(), &key),
                Ok(config) => {
                    let settings = config.settings();
                    let written: toml::Value = value.parse().unwrap();
                    let mut read = &serde_json::to_value(settings).unwrap();
                    for part in key.split('.') {
                        read = &read[part];
                    }
                    let same = match &written {
                        toml::Value::Integer(n) if read.is_f64() => read.as_f64() == Some(*n as f64),
                        toml::Value::Integer(n) => read.as_i64() == Some(*n)
                            && largest(&key).is_none_or(|max| *n <= max),
                        toml::Value::Float(f) => f.is_finite() && read.as_f64() == Some(*f),
                        toml::Value::Boolean(b) => read.as_bool() == Some(*b),
                        toml::Value::String(s) => read.as_str() == Some(s),
                        toml::Value::Array(items) => read.as_array().map(|a| a.len()) == Some(items.len()),
                        _ => false,
                    };
                    prop_assert!(same, "{key} = {value:.100} was read as {read}");
                    // The durations the network adds to an Instant fit.
                    let now = std::time::Instant::now();
                    for d in [config.net().request_timeout, config.net().idle_timeout, config.net().turn_timeout] {
                        prop_assert!(now.checked_add(d * 4).is_some());
                    }
                }
            }
        }

        /// The same through `GROVE_*` variables, whose values are text.
        #[test]
        fn every_variable_is_read_strictly((key, value) in any_case()) {
            let text = match value.parse::<toml::Value>() {
                Ok(toml::Value::String(s)) => s,
                _ => value.clone(),
            };
            // A variable cannot hold a NUL byte.
            let text = text.replace('\0', "");
            let var = format!("GROVE_{}", key.to_ascii_uppercase().replace('.', "__"));
            let vars = vec![
                ("GROVE_NET__LISTEN".to_string(), "/ip4/127.0.0.1/tcp/0".to_string()),
                (var.clone(), text.clone()),
            ];
            let vars = if key == "net.listen" { vars[1..].to_vec() } else { vars };
            let checked = grove::config::Settings::from_layers(None, vars)
                .and_then(|s| s.check(Default::default()))
                .and_then(|config| config.check_start());
            match checked {
                Err(e) => assert_names(&e.to_string(), &key),
                Ok(_) => {
                    let whole = keys().iter().any(|(k, d)| *k == key && d.is_u64());
                    if let (true, Ok(toml::Value::Integer(n))) = (whole, value.parse::<toml::Value>()) {
                        prop_assert!(largest(&key).is_none_or(|max| n <= max), "{var}={text}");
                    }
                }
            }
        }
    }
}

/// `config check` and `node run` on `toml` both refuse it, naming `key`.
fn refused_at_the_door(g: &Grove, toml: &str, key: &str) -> String {
    let file = g.write("door.toml", toml.as_bytes());
    let checked =
        check_refusal(g, &file).unwrap_or_else(|| panic!("config check accepted {toml:.200}"));
    assert_names(&checked, key);
    assert!(checked.contains(&format!("`{key}`")), "{checked}");
    let started =
        start_refusal(g, &file).unwrap_or_else(|| panic!("node run started on {toml:.200}"));
    assert_eq!(error_line(&checked), error_line(&started));
    checked
}

/// Row 1: a request timeout libp2p cannot add to an Instant.
#[test]
fn a_timeout_past_what_its_arithmetic_holds_is_refused() {
    let g = Grove::new();
    for value in ["1e30", "9223372036854775807", "3601", "0"] {
        let err = refused_at_the_door(
            &g,
            &format!("[net]\nrequest_timeout_secs = {value}\n"),
            "net.request_timeout_secs",
        );
        assert!(
            err.contains("whole number") || err.contains("between 1 and 3600"),
            "{err}"
        );
    }
}

/// Row 2: a thread count no machine runs.
#[test]
fn a_thread_count_past_the_cap_is_refused_before_the_model_runs() {
    let g = Grove::new();
    for value in ["1e30", "100000"] {
        let cfg = g.write("t.toml", format!("[model]\nthreads = {value}\n").as_bytes());
        let out = g
            .cmd(&["--config", cfg.to_str().unwrap(), "model", "chat", "hi"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("`model.threads`"), "{err}");
    }
}

/// Row 3: a book limit whose `+ 1` wrapped; the largest allowed works.
#[test]
fn a_book_limit_is_bounded_and_the_largest_one_works() {
    let g = Grove::new();
    let book = g.write(
        "small.txt",
        crate::support::generated_book("Small", "S", 5, 10, 1).as_bytes(),
    );
    let cfg = g.write("b.toml", b"[limits]\nmax_book_bytes = 1e30\n");
    let err = g.fails(&[
        "--config",
        cfg.to_str().unwrap(),
        "book",
        "add",
        book.to_str().unwrap(),
    ]);
    assert!(err.contains("`limits.max_book_bytes`"), "{err}");
    let cfg = g.write("b2.toml", b"[limits]\nmax_book_bytes = 1073741825\n");
    let err = g.fails(&[
        "--config",
        cfg.to_str().unwrap(),
        "book",
        "add",
        book.to_str().unwrap(),
    ]);
    assert!(err.contains("between 1 and 1073741824"), "{err}");
    let cfg = g.write("b3.toml", b"[limits]\nmax_book_bytes = 1073741824\n");
    let added = g.json(&[
        "--config",
        cfg.to_str().unwrap(),
        "book",
        "add",
        book.to_str().unwrap(),
    ]);
    assert_eq!(added["status"], "added");
}

/// Row 4: no float, `inf` or `nan` for a whole number, no number for a
/// boolean, no saturation: every whole-number key, each refused by name.
#[test]
fn no_key_coerces_a_value_of_another_kind() {
    let g = Grove::new();
    let bad = ["1e30", "inf", "nan", "true", "0.5", "-1", "\"5\""];
    let mut n = 0;
    for (key, default) in keys() {
        let values: Vec<&str> = if default.is_u64() {
            vec![bad[n % bad.len()]]
        } else if default.is_boolean() {
            vec!["1", "\"true\""]
        } else if default.is_f64() {
            vec!["nan", "inf"]
        } else {
            continue;
        };
        for value in values {
            n += 1;
            let file = g.write("k.toml", format!("{key} = {value}\n").as_bytes());
            let err = check_refusal(&g, &file)
                .unwrap_or_else(|| panic!("config check accepted {key} = {value}"));
            assert!(err.contains(&format!("`{key}`")), "{key} = {value}: {err}");
        }
    }
    assert!(n > 50, "{n} keys tried");
    // The environment is text, read as the key's kind.
    let file = g.write("empty.toml", b"");
    for (var, value, key) in [
        ("GROVE_MODEL__GUIDED", "1", "model.guided"),
        ("GROVE_MOOT__K", "1e30", "moot.k"),
        (
            "GROVE_NET__IDLE_TIMEOUT_SECS",
            "inf",
            "net.idle_timeout_secs",
        ),
    ] {
        let out = check(&file, &[(var, value)]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            err.contains(&format!("`{key}`")) && err.contains(var),
            "{err}"
        );
    }
    let out = check(&file, &[("GROVE_MODEL__GUIDED", "false")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Row 5: values that passed the check and failed later.
#[test]
fn what_fails_later_is_refused_at_the_door() {
    use std::os::unix::fs::PermissionsExt;
    let g = Grove::new();
    refused_at_the_door(&g, "[model]\ntimeout_secs = 0\n", "model.timeout_secs");
    let err = refused_at_the_door(
        &g,
        "[net]\nlisten = [\"/ip4/127.0.0.1/udp/4100/quic-v1\"]\n",
        "net.listen",
    );
    assert!(err.contains("no QUIC transport"), "{err}");
    let listen = "net.listen = [\"/ip4/127.0.0.1/tcp/0\"]\n";
    let err = refused_at_the_door(
        &g,
        &format!("{listen}[hooks]\nprogram = \"/nonexistent/hook\"\n"),
        "hooks.program",
    );
    assert!(err.contains("No such file"), "{err}");
    let script = g.write("hook.sh", b"#!/bin/sh\nexit 0\n");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    // No execute bit: refused even for root (which needs one bit).
    let err = refused_at_the_door(
        &g,
        &format!(
            "{listen}[hooks]\nprogram = {:?}\n",
            script.to_str().unwrap()
        ),
        "hooks.program",
    );
    assert!(err.contains("not executable"), "{err}");
    let err = refused_at_the_door(&g, "[log]\nlevel = \"inof\"\n", "log.level");
    assert!(err.contains("`inof` is not a level"), "{err}");
}

/// Row 6: each error names its own key and shows a long value shortened.
#[test]
fn an_error_names_its_own_key_and_shortens_the_value() {
    let g = Grove::new();
    let err = refused_at_the_door(
        &g,
        "[net]\nidle_timeout_secs = 0\n",
        "net.idle_timeout_secs",
    );
    assert!(!err.contains("request_timeout_secs"), "{err}");
    let err = refused_at_the_door(
        &g,
        "[fetch]\nconnect_timeout_secs = 0\n",
        "fetch.connect_timeout_secs",
    );
    assert!(!err.contains("`fetch.timeout_secs`"), "{err}");
    let long = "x".repeat(1 << 20);
    for (toml, key) in [
        (
            format!("[net]\nreachability = \"{long}\"\n"),
            "net.reachability",
        ),
        (format!("[model]\nbackend = \"{long}\"\n"), "model.backend"),
        (format!("[net]\nlisten = [\"/{long}\"]\n"), "net.listen"),
        (format!("[log]\nlevel = \"{long}\"\n"), "log.level"),
        (format!("[hooks]\nevents = [\"{long}\"]\n"), "hooks.events"),
        (
            format!("[net]\nmax_connections = \"{long}\"\n"),
            "net.max_connections",
        ),
    ] {
        let file = g.write("long.toml", toml.as_bytes());
        let err = check_refusal(&g, &file).unwrap();
        assert!(err.contains(&format!("`{key}`")), "{err:.300}");
        assert!(err.len() < 600, "{} bytes: {err:.600}", err.len());
    }
}

/// Row 7: a listen list that ran the node out of file descriptors.
#[test]
fn an_absurd_listen_list_is_refused_at_once() {
    let g = Grove::new();
    let addrs: Vec<String> = (0..400_000)
        .map(|i| format!("\"/ip4/127.0.0.1/tcp/{}\"", 1024 + i % 60_000))
        .collect();
    let started = std::time::Instant::now();
    let err = refused_at_the_door(
        &g,
        &format!("[net]\nlisten = [{}]\n", addrs.join(",")),
        "net.listen",
    );
    assert!(err.contains("at most 64"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

/// Row 15: redirects are bounded, so a loop ends at the bound, not the timeout.
#[test]
fn redirects_are_bounded_and_a_loop_ends_at_the_bound() {
    use std::io::{Read, Write};
    let g = Grove::new();
    for value in ["1e30", "21"] {
        refused_at_the_door(
            &g,
            &format!("[fetch]\nmax_redirects = {value}\n"),
            "fetch.max_redirects",
        );
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(64) {
            let Ok(mut s) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = s.write_all(
                b"HTTP/1.1 302 Found\r\nLocation: /again\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    let cfg = g.write("r.toml", b"[fetch]\nmax_redirects = 20\n");
    let started = std::time::Instant::now();
    let err = g.fails(&[
        "--config",
        cfg.to_str().unwrap(),
        "book",
        "add",
        &format!("http://{addr}/book.txt"),
    ]);
    assert!(err.to_lowercase().contains("redirect"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
}
