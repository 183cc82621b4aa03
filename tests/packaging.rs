//! The Debian package (`deploy/build-deb.sh`, `docs/packaging.md`): man
//! pages and completions from the CLI definition, the commented conffile,
//! lintian, and an install in a throwaway root (a private mount, PID and
//! network namespace whose `/` is an overlay with a tmpfs upper layer) that
//! runs `docs/operator-guide.md`'s commands against the installed layout,
//! then removes and purges the package. `.ci/run` builds the package first
//! (`GROVE_TEST_DEB` names another).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{grove_cmd, skip};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The package under test, or `None` after `skip`.
fn deb() -> Option<PathBuf> {
    let path = match std::env::var_os("GROVE_TEST_DEB") {
        Some(p) => PathBuf::from(p),
        None => {
            let arch = Command::new("dpkg")
                .arg("--print-architecture")
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
            let Some(arch) = arch else {
                skip("dpkg is not installed");
                return None;
            };
            Path::new(ROOT).join(format!(
                "target/debian/grove_{}_{arch}.deb",
                env!("CARGO_PKG_VERSION")
            ))
        }
    };
    if !path.is_file() {
        skip(&format!(
            "no package at {} (build it with deploy/build-deb.sh)",
            path.display()
        ));
        return None;
    }
    Some(path)
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn completions_and_man_pages_come_from_the_cli_definition() {
    for (shell, marker) in [
        ("bash", "complete -F _grove"),
        ("zsh", "#compdef grove"),
        ("fish", "complete -c grove"),
    ] {
        let out = grove_cmd().args(["completions", shell]).output().unwrap();
        assert!(out.status.success(), "completions {shell}: {out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains(marker), "{shell} script lacks {marker:?}");
        assert!(
            text.contains("join"),
            "{shell} script does not complete `mesh join`"
        );
        assert!(
            !text.contains("manpages"),
            "{shell} script completes the hidden `manpages`"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let out = grove_cmd()
        .arg("manpages")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "manpages: {out:?}");
    let help = grove_cmd().arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    // Every top-level command the help lists has its page (and so do theirs).
    let commands: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .unwrap()
        .split("Options:")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.contains(&"mesh") && commands.contains(&"completions"));
    for c in commands {
        let page = dir.path().join(format!("grove-{c}.1"));
        assert!(page.is_file(), "no man page {}", page.display());
    }
    let join = std::fs::read_to_string(dir.path().join("grove-mesh-join.1")).unwrap();
    assert!(join.starts_with(".ie") || join.contains(".TH grove-mesh-join 1"));
    assert!(join.contains("INVITE"));
    assert!(dir.path().join("grove.1").is_file());
    assert!(!dir.path().join("grove-manpages.1").exists());
}

#[test]
fn conffile_is_valid_commented_and_uncommented() {
    let conffile = Path::new(ROOT).join("packaging/deb/grove.toml");
    let text = std::fs::read_to_string(&conffile).unwrap();
    // `# key = value` and `# [section]` lines are settings; other comments prose.
    let setting = regex::Regex::new(r"^# (\[[a-z]+\].*|[a-z_]+ = .*)$").unwrap();
    let uncommented: String = text
        .lines()
        .map(|l| match setting.is_match(l) {
            true => &l[2..],
            false => l,
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let settings = uncommented.lines().filter(|l| l.contains(" = ")).count();
    assert!(settings >= 20, "only {settings} settings in the conffile");
    let dir = tempfile::tempdir().unwrap();
    for (name, body) in [
        ("commented.toml", text.as_str()),
        ("uncommented.toml", &uncommented),
    ] {
        let file = dir.path().join(name);
        std::fs::write(&file, body).unwrap();
        let out = grove_cmd()
            .args(["config", "check", "--config"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name} refused: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn lintian_reports_only_tags_docs_packaging_explains() {
    let Some(deb) = deb() else { return };
    if !have("lintian") {
        return skip("lintian is not installed");
    }
    let out = Command::new("lintian")
        .arg("--info")
        .arg(&deb)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    let doc = std::fs::read_to_string(Path::new(ROOT).join("docs/packaging.md")).unwrap();
    let mut unexplained = Vec::new();
    for line in report.lines() {
        // "W: grove: tag-name extra" (E errors, W warnings, I info).
        let Some((kind, rest)) = line.split_once(": ") else {
            continue;
        };
        if !["E", "W", "I"].contains(&kind) {
            continue;
        }
        let tag = rest.split_whitespace().nth(1).unwrap_or_default();
        if !doc.contains(&format!("`{tag}`")) {
            unexplained.push(line.to_string());
        }
    }
    assert!(
        unexplained.is_empty(),
        "lintian tags docs/packaging.md does not explain:\n{}",
        unexplained.join("\n")
    );
    assert!(
        !report.lines().any(|l| l.starts_with("E: ")),
        "lintian errors:\n{report}"
    );
}

/// What a command of the guide must do in the throwaway root.
#[derive(Debug, PartialEq)]
enum Expect {
    Success,
    /// Needs another node or an id from one: it must parse (exit 0 or 1,
    /// not clap's usage error 2).
    Parses,
    /// A `systemctl` command: exit 0, or 1 only because no systemd runs as
    /// PID 1 (what it does offline, `enable`, is done; the runner then
    /// starts or stops the unit as `start_unit` describes).
    Service,
    /// Cannot run there; the reason is printed.
    NotRun(&'static str),
}

/// The commands of the guide's fenced `sh` blocks, in order (continuations
/// joined, comments dropped), with what each must do. Configure is not
/// commands.
fn guide_commands() -> Vec<(String, Expect)> {
    let guide = std::fs::read_to_string(Path::new(ROOT).join("docs/operator-guide.md")).unwrap();
    let needs_another_node = [
        "grove mesh join",
        "grove mesh vote",
        "grove mesh propose kick",
        "grove mesh leave",
        "grove mesh withdraw",
    ];
    let mut out = Vec::new();
    let mut section = String::new();
    let mut in_block = false;
    let mut pending = String::new();
    for line in guide.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            section = h.to_string();
            continue;
        }
        if line.starts_with("```") {
            in_block = !in_block && line.trim() == "```sh";
            continue;
        }
        if !in_block || section == "Configure" {
            continue;
        }
        let code = match line.find(" #") {
            Some(i) => &line[..i],
            None => line,
        }
        .trim_end();
        if let Some(head) = code.strip_suffix('\\') {
            pending.push_str(head);
            continue;
        }
        let cmd = format!("{pending}{code}").trim().to_string();
        pending.clear();
        if cmd.is_empty() {
            continue;
        }
        let bare = cmd.strip_prefix("sudo ").unwrap_or(&cmd);
        let expect = if bare.starts_with("deploy/build-deb.sh") {
            Expect::NotRun("the package under test is this command's output")
        } else if bare.starts_with("journalctl") {
            Expect::NotRun("no journald in the throwaway root (and -f never ends)")
        } else if bare.starts_with("grove mesh watch") {
            Expect::NotRun("it streams events until interrupted")
        } else if bare.starts_with("systemctl ") {
            Expect::Service
        } else if cmd.contains('…') || needs_another_node.iter().any(|p| bare.starts_with(p)) {
            Expect::Parses
        } else {
            Expect::Success
        };
        out.push((cmd, expect));
    }
    out
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The shell run inside the throwaway root: the guide's commands, then the
/// package checks, then remove and purge. Lines starting `::` are markers.
fn chroot_script(commands: &[(String, Expect)], deb_name: &str) -> String {
    let mut s = String::from(include_str!("support/packaging_root.sh"));
    s.push_str(&format!("cd /tmp/repo\nDEB=target/debian/{deb_name}\n"));
    for (i, (cmd, expect)) in commands.iter().enumerate() {
        if let Expect::NotRun(why) = expect {
            s.push_str(&format!(
                "echo {}\n",
                sh_quote(&format!("::notrun {i} {why}"))
            ));
            continue;
        }
        let run = match cmd.strip_prefix("sudo ") {
            Some(root_cmd) => format!("USER=alice sh -c {}", sh_quote(root_cmd)),
            None => format!("runuser -u alice -- sh -c {}", sh_quote(cmd)),
        };
        s.push_str(&format!(
            "echo '::cmd {i}'\n{run} </dev/null 2>/tmp/cmd.err\necho \"::rc {i} $?\"\n\
             grep -q 'not been booted with systemd' /tmp/cmd.err && echo '::nosystemd {i}'\n\
             cat /tmp/cmd.err >&2\n"
        ));
        // No service manager runs here: after systemctl has done what it
        // does offline (enable), start or stop what the installed unit says.
        if cmd.contains("systemctl") {
            if cmd.contains(" stop ") || cmd.contains(" restart ") {
                s.push_str("stop_unit\n");
            }
            if cmd.contains("--now") || cmd.contains(" start ") || cmd.contains(" restart ") {
                s.push_str("start_unit\n");
            }
        }
    }
    s.push_str("package_checks\n");
    s
}

#[test]
fn package_installs_follows_the_operator_guide_and_purges() {
    let Some(deb) = deb() else { return };
    if unsafe { libc::geteuid() } != 0 {
        return skip("the throwaway root needs root (unshare, overlayfs, chroot)");
    }
    for tool in [
        "unshare",
        "chroot",
        "runuser",
        "setpriv",
        "ip",
        "dpkg",
        "systemd-analyze",
        "systemd-sysusers",
        "man",
        "readelf",
    ] {
        if !have(tool) {
            return skip(&format!("{tool} is not installed"));
        }
    }
    let commands = guide_commands();
    let sections_ok = [
        "dpkg -i",
        "systemctl enable --now grove",
        "grove node status",
        "grove mesh init",
        "grove mesh status",
        "backup",
    ];
    for want in sections_ok {
        assert!(
            commands.iter().any(|(c, _)| c.contains(want)),
            "the guide's commands lack {want:?}: {commands:?}"
        );
    }
    // Under the name the guide's `target/debian/grove_*.deb` finds, whatever
    // GROVE_TEST_DEB is called.
    let fields = Command::new("dpkg-deb")
        .args([
            "--show",
            "--showformat",
            "${Package}_${Version}_${Architecture}",
        ])
        .arg(&deb)
        .output()
        .unwrap();
    assert!(fields.status.success(), "dpkg-deb --show: {fields:?}");
    let deb_name = format!("{}.deb", String::from_utf8(fields.stdout).unwrap().trim());
    let script = chroot_script(&commands, &deb_name);
    let dir = tempfile::tempdir().unwrap();
    let inner = dir.path().join("inner.sh");
    std::fs::write(&inner, script).unwrap();
    let outer = dir.path().join("outer.sh");
    std::fs::write(&outer, include_str!("support/packaging_ns.sh")).unwrap();
    let workdir = dir.path().join("root");
    std::fs::create_dir(&workdir).unwrap();
    let host_files = ["/etc/passwd", "/etc/group", "/var/lib/dpkg/status"];
    let etc_grove_before = Path::new("/etc/grove").exists();
    let host_before: Vec<Vec<u8>> = host_files
        .iter()
        .map(|f| std::fs::read(f).unwrap())
        .collect();
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--mount",
        "--pid",
        "--fork",
        "--net",
        "--propagation",
        "private",
        "sh",
    ])
    .arg(&outer)
    .env("DEB", &deb)
    .env("DEB_NAME", &deb_name)
    .env("WORKDIR", &workdir)
    .env("INNER", &inner);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("GROVE_") {
            cmd.env_remove(k);
        }
    }
    let out = cmd.output().unwrap();
    for (file, before) in host_files.iter().zip(&host_before) {
        assert!(
            std::fs::read(file).unwrap() == *before,
            "the install test changed the host's {file}"
        );
    }
    assert_eq!(
        Path::new("/etc/grove").exists(),
        etc_grove_before,
        "the install test changed the host's /etc/grove"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let context = format!("--- stdout\n{stdout}\n--- stderr\n{stderr}");
    assert!(out.status.success(), "the throwaway root failed\n{context}");
    for (i, (cmd, expect)) in commands.iter().enumerate() {
        if matches!(expect, Expect::NotRun(_)) {
            continue;
        }
        let rc: i32 = stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("::rc {i} ")))
            .unwrap_or_else(|| panic!("`{cmd}` did not run\n{context}"))
            .parse()
            .unwrap();
        match expect {
            Expect::Success => assert_eq!(rc, 0, "`{cmd}` failed\n{context}"),
            Expect::Parses => assert!(rc == 0 || rc == 1, "`{cmd}` exited {rc}\n{context}"),
            Expect::Service => assert!(
                rc == 0 || (rc == 1 && stdout.contains(&format!("::nosystemd {i}\n"))),
                "`{cmd}` exited {rc}\n{context}"
            ),
            Expect::NotRun(_) => {}
        }
    }
    for marker in [
        "::installed version ok",
        "::enabled ok",
        "::stripped ok",
        "::man ok",
        "::completions ok",
        "::user ok",
        "::verify ok",
        "::service answered",
        "::backup ok",
        "::removed ok",
        "::purged ok",
    ] {
        assert!(stdout.contains(marker), "missing {marker:?}\n{context}");
    }
    // What the package left in the root after the purge: only what policy
    // keeps (the user and group), dpkg's and man-db's own records, and what
    // the test and the guide's operator made (alice, the backup).
    let allowed = [
        "etc/passwd",
        "etc/group",
        "etc/shadow",
        "etc/gshadow",
        "etc/subuid",
        "etc/subgid",
        "etc/.pwd.lock",
        "etc/ld.so.cache",
        "var/lib/dpkg/",
        "var/log/dpkg.log",
        "var/cache/man/",
        "var/cache/debconf/",
        "var/lib/systemd/deb-systemd-helper-",
        "var/log/lastlog",
        "var/log/faillog",
        "var/backups/grove-",
        "home/alice",
        "var/mail/alice",
    ];
    let left: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("::left "))
        .filter(|p| !allowed.iter().any(|a| p.starts_with(a)))
        .collect();
    assert!(left.is_empty(), "left after purge: {left:?}\n{context}");
    assert!(
        stdout.contains("::left etc/passwd"),
        "the upper layer was not listed\n{context}"
    );
}
