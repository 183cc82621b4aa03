//! The daemon under the sandbox of `systemd/grove.service`, emulated without
//! systemd as PID 1: every directive of the unit is read from the file and
//! either turned into what systemd would do (namespaces, mounts, user,
//! capabilities, seccomp filters built from `systemd-analyze
//! syscall-filter`) by the C harness `tests/support/unit_sandbox.c`, or
//! named on a list of directives the harness does not emulate, with why.
//!
//! Each run happens in a mount and network namespace the test makes
//! (`unshare --mount --net`), which stands for the machine: a fresh `/run`,
//! the binary installed as `/usr/bin/grove` and the `grove` user and group of
//! `systemd/grove.sysusers` added to `/etc/passwd` and `/etc/group`, all on
//! overlays whose upper layers are a tmpfs, so nothing reaches the host's
//! files or network. The harness needs root (to map users and mount);
//! elsewhere the tests skip, and fail under `GROVE_TEST_STRICT=1`.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::skip;

const UNIT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/systemd/grove.service");
const SYSUSERS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/systemd/grove.sysusers");
const HARNESS_SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/unit_sandbox.c");

/// Where the harness installs its probe inside the emulated machine.
const PROBE: &str = "/usr/bin/grove-sandbox-probe";

/// Directives the harness does not emulate, and why. Every directive of the
/// unit must be emulated or listed here; the test fails on any other.
const NOT_EMULATED: &[(&str, &str)] = &[
    ("Description", "unit metadata"),
    (
        "After",
        "ordering against other units: no service manager here",
    ),
    (
        "Wants",
        "dependency on other units: no service manager here",
    ),
    ("StartLimitIntervalSec", "service manager's restart policy"),
    ("StartLimitBurst", "service manager's restart policy"),
    (
        "Restart",
        "service manager's restart policy (the exit codes it acts on are tested in tests/daemon.rs)",
    ),
    ("RestartSec", "service manager's restart policy"),
    (
        "DevicePolicy",
        "cgroup device controller (BPF); the private /dev holds only the pseudo devices anyway",
    ),
    (
        "RemoveIPC",
        "the manager removes the user's SysV/POSIX IPC objects after stop; grove makes none",
    ),
    ("WantedBy", "install-time symlink (systemctl enable)"),
];

/// One `Key=Value` line of the unit.
#[derive(Clone, Debug)]
struct Directive {
    section: String,
    key: String,
    value: String,
}

fn parse_unit(text: &str) -> Vec<Directive> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_string();
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("not a directive: {line:?}"));
        out.push(Directive {
            section: section.clone(),
            key: key.trim().to_string(),
            value: value.trim().to_string(),
        });
    }
    out
}

fn yes(d: &Directive) -> bool {
    match d.value.as_str() {
        "yes" | "true" | "on" | "1" => true,
        "no" | "false" | "off" | "0" => false,
        other => panic!("{}={other}: not a boolean the harness knows", d.key),
    }
}

/// A systemd time span as the unit writes it (`30s`, `2min`, `1500ms`, `15`).
fn timespan(value: &str) -> Duration {
    let split = value
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(value.len());
    let (n, unit) = value.split_at(split);
    let n: u64 = n.parse().unwrap_or_else(|_| panic!("time span {value:?}"));
    match unit {
        "" | "s" | "sec" => Duration::from_secs(n),
        "ms" | "msec" => Duration::from_millis(n),
        "min" | "m" => Duration::from_secs(60 * n),
        other => panic!("time unit {other:?} of {value:?} not known to the harness"),
    }
}

/// `systemd-analyze syscall-filter`: each `@group` and its members (names
/// and nested `@groups`).
fn syscall_groups() -> Option<BTreeMap<String, Vec<String>>> {
    let out = Command::new("systemd-analyze")
        .arg("syscall-filter")
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if line.starts_with('@') {
            let name = line.trim().to_string();
            groups.entry(name.clone()).or_default();
            current = Some(name);
        } else if line.trim().is_empty() || !line.starts_with(' ') {
            current = None;
        } else if let Some(group) = &current {
            let item = line.trim();
            if !item.starts_with('#') {
                groups.get_mut(group).expect("group").push(item.to_string());
            }
        }
    }
    groups.contains_key("@system-service").then_some(groups)
}

fn expand(groups: &BTreeMap<String, Vec<String>>, item: &str, out: &mut BTreeSet<String>) {
    if item.starts_with('@') {
        let members = groups
            .get(item)
            .unwrap_or_else(|| panic!("syscall group {item} unknown to systemd-analyze"));
        for m in members {
            expand(groups, m, out);
        }
    } else {
        out.insert(item.to_string());
    }
}

fn expand_all(groups: &BTreeMap<String, Vec<String>>, items: &[&str]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for item in items {
        expand(groups, item, &mut out);
    }
    out
}

/// The service user and group `systemd-sysusers` would create from
/// grove.sysusers, allocated as it does (from the top of the system range,
/// uid = gid when free), plus two operators: one in the group, one not.
struct Users {
    passwd: String,
    group: String,
    uid: u32,
    gid: u32,
    home: String,
    shell: String,
}

fn ids_in(text: &str, field: usize) -> BTreeSet<u32> {
    text.lines()
        .filter_map(|l| l.split(':').nth(field)?.parse().ok())
        .collect()
}

fn sysusers(spec: &str, passwd: &str, group: &str) -> Users {
    let (mut used_uids, mut used_gids) = (ids_in(passwd, 2), ids_in(group, 2));
    let (mut passwd, mut group) = (passwd.to_string(), group.to_string());
    let mut gids = BTreeMap::new();
    let mut service = None;
    let free_system = |used: &BTreeSet<u32>, also: &BTreeSet<u32>| {
        (1..1000u32)
            .rev()
            .find(|id| !used.contains(id) && !also.contains(id))
            .expect("a free system id")
    };
    for line in spec.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields = split_sysusers(line);
        match fields.as_slice() {
            [kind, name, id] if kind == "g" => {
                assert_eq!(id, "-", "sysusers: only dynamic ids are emulated");
                let gid = free_system(&used_gids, &used_uids);
                used_gids.insert(gid);
                group.push_str(&format!("{name}:x:{gid}:\n"));
                gids.insert(name.clone(), gid);
            }
            [kind, name, id, gecos, home, shell] if kind == "u" => {
                let (uid_spec, group_name) = id.split_once(':').unwrap_or((id, name));
                assert_eq!(uid_spec, "-", "sysusers: only dynamic ids are emulated");
                let gid = *gids
                    .get(group_name)
                    .unwrap_or_else(|| panic!("sysusers: group {group_name} not declared first"));
                let uid = if used_uids.contains(&gid) {
                    free_system(&used_uids, &BTreeSet::new())
                } else {
                    gid
                };
                used_uids.insert(uid);
                passwd.push_str(&format!("{name}:x:{uid}:{gid}:{gecos}:{home}:{shell}\n"));
                service = Some((name.clone(), uid, gid, home.clone(), shell.clone()));
            }
            _ => panic!("sysusers line not emulated: {line:?}"),
        }
    }
    let (name, uid, gid, home, shell) = service.expect("a u line in grove.sysusers");
    // The operators: alice in the service's group, bob not.
    let regular = |used: &BTreeSet<u32>| (1000..60000u32).find(|id| !used.contains(id)).unwrap();
    for (op, member) in [("alice", true), ("bob", false)] {
        let id = regular(&used_uids.union(&used_gids).copied().collect());
        used_uids.insert(id);
        used_gids.insert(id);
        passwd.push_str(&format!("{op}:x:{id}:{id}::/home/{op}:/bin/sh\n"));
        group.push_str(&format!("{op}:x:{id}:\n"));
        if member {
            group = group
                .lines()
                .map(|l| {
                    if l.starts_with(&format!("{name}:")) {
                        format!("{l}{op}\n")
                    } else {
                        format!("{l}\n")
                    }
                })
                .collect();
        }
    }
    Users {
        passwd,
        group,
        uid,
        gid,
        home,
        shell,
    }
}

/// A sysusers.d line's fields (double quotes group words).
fn split_sysusers(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line.trim();
    while !rest.is_empty() {
        if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted.find('"').expect("closing quote");
            out.push(quoted[..end].to_string());
            rest = quoted[end + 1..].trim_start();
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            out.push(rest[..end].to_string());
            rest = rest[end..].trim_start();
        }
    }
    out
}

/// What the unit asks for, turned into the harness's options, the
/// machine's preparation, and the service's environment.
struct Plan {
    /// `unit_sandbox run` options, in order.
    harness: Vec<String>,
    exec_start: Vec<String>,
    /// Directories the manager creates: (path, mode, owned by the service).
    directories: Vec<(String, String, bool)>,
    env: Vec<(String, String)>,
    watchdog: Option<Duration>,
    stop_timeout: Duration,
    users: Users,
    /// Directives emulated, and those listed as not.
    emulated: Vec<String>,
    not_emulated: Vec<(String, &'static str)>,
}

fn plan(unit: &[Directive], groups: &BTreeMap<String, Vec<String>>, users: Users) -> Plan {
    let mut p = Plan {
        harness: Vec::new(),
        exec_start: Vec::new(),
        directories: Vec::new(),
        env: Vec::new(),
        watchdog: None,
        stop_timeout: Duration::from_secs(90),
        users,
        emulated: Vec::new(),
        not_emulated: Vec::new(),
    };
    let opt = |p: &mut Plan, args: &[&str]| p.harness.extend(args.iter().map(|a| a.to_string()));
    // Syscall filtering: systemd's allow-list semantics (the first
    // non-inverted line starts from @default; later lines add or remove),
    // plus the deny lists other directives imply.
    let mut allowed: Option<BTreeSet<String>> = None;
    let mut implied_deny: Vec<BTreeSet<String>> = Vec::new();
    let mut proc_opts: Vec<&str> = Vec::new();
    let mut directory_modes: BTreeMap<&str, String> = BTreeMap::new();
    for d in unit {
        if d.key.ends_with("DirectoryMode") {
            directory_modes.insert(d.key.trim_end_matches("Mode"), d.value.clone());
        }
    }
    let mut user = None;
    let mut group = None;
    for d in unit {
        let v = d.value.as_str();
        let mut handled = true;
        match (d.section.as_str(), d.key.as_str()) {
            ("Service", "Type") => {
                assert_eq!(v, "notify", "only Type=notify is emulated");
                p.env
                    .push(("NOTIFY_SOCKET".into(), "/run/systemd/notify".into()));
            }
            ("Service", "NotifyAccess") => {
                assert_eq!(v, "main", "only NotifyAccess=main is emulated");
                // The listener checks each datagram's sender pid.
            }
            ("Service", "ExecStart") => {
                p.exec_start = v.split_whitespace().map(String::from).collect();
            }
            ("Service", "User") => user = Some(v.to_string()),
            ("Service", "Group") => group = Some(v.to_string()),
            (
                "Service",
                key @ ("StateDirectory" | "RuntimeDirectory" | "ConfigurationDirectory"),
            ) => {
                let (root, var, writable) = match key {
                    "StateDirectory" => ("/var/lib", "STATE_DIRECTORY", true),
                    "RuntimeDirectory" => ("/run", "RUNTIME_DIRECTORY", true),
                    _ => ("/etc", "CONFIGURATION_DIRECTORY", false),
                };
                let path = format!("{root}/{v}");
                let mode = directory_modes
                    .get(key)
                    .cloned()
                    .unwrap_or_else(|| "0755".into());
                p.directories.push((path.clone(), mode, writable));
                if writable {
                    opt(&mut p, &["--rw", &path]);
                }
                p.env.push((var.into(), path));
            }
            (
                "Service",
                "StateDirectoryMode" | "RuntimeDirectoryMode" | "ConfigurationDirectoryMode",
            ) => {}
            ("Service", "UMask") => opt(&mut p, &["--umask", v]),
            ("Service", "TimeoutStopSec") => p.stop_timeout = timespan(v),
            ("Service", "WatchdogSec") => {
                let every = timespan(v);
                p.watchdog = Some(every);
                p.env
                    .push(("WATCHDOG_USEC".into(), every.as_micros().to_string()));
            }
            ("Service", "NoNewPrivileges") if yes(d) => opt(&mut p, &["--nnp"]),
            ("Service", "CapabilityBoundingSet") if v.is_empty() => {
                opt(&mut p, &["--drop-bounding"])
            }
            ("Service", "AmbientCapabilities") if v.is_empty() => opt(&mut p, &["--clear-ambient"]),
            ("Service", "PrivateUsers") if yes(d) => opt(&mut p, &["--userns"]),
            ("Service", "PrivateMounts") if yes(d) => {
                // The harness always gives the service its own mount
                // namespace, with slave propagation, as systemd does here.
            }
            ("Service", "ProtectSystem") if v == "strict" => opt(&mut p, &["--ro-root"]),
            ("Service", "ProtectHome") if yes(d) => {
                for path in ["/home", "/root", "/run/user"] {
                    opt(&mut p, &["--inaccessible", path]);
                }
            }
            ("Service", "PrivateTmp") if yes(d) => opt(&mut p, &["--private-tmp"]),
            ("Service", "PrivateDevices") if yes(d) => {
                opt(&mut p, &["--private-dev"]);
                implied_deny.push(expand_all(groups, &["@raw-io"]));
            }
            ("Service", "ProtectKernelTunables") if yes(d) => {
                for path in [
                    "/proc/acpi",
                    "/proc/apm",
                    "/proc/asound",
                    "/proc/bus",
                    "/proc/fs",
                    "/proc/irq",
                    "/proc/latency_stats",
                    "/proc/mtrr",
                    "/proc/scsi",
                    "/proc/sys",
                    "/proc/sysrq-trigger",
                    "/proc/timer_stats",
                    "/sys",
                ] {
                    opt(&mut p, &["--ro", path]);
                }
                // /proc/kallsyms and /proc/kcore: not in a ProcSubset=pid
                // /proc, and the harness checks there is no such mount left.
            }
            ("Service", "ProtectKernelModules") if yes(d) => {
                for path in ["/usr/lib/modules", "/lib/modules"] {
                    opt(&mut p, &["--inaccessible", path]);
                }
                implied_deny.push(expand_all(groups, &["@module"]));
            }
            ("Service", "ProtectKernelLogs") if yes(d) => {
                // /proc/kmsg and /dev/kmsg do not exist under ProcSubset=pid
                // and PrivateDevices; the syslog syscall is refused.
                implied_deny.push(expand_all(groups, &["syslog"]));
            }
            ("Service", "ProtectControlGroups") if yes(d) => {
                opt(&mut p, &["--ro", "/sys/fs/cgroup"])
            }
            ("Service", "ProtectClock") if yes(d) => {
                implied_deny.push(expand_all(groups, &["@clock"]))
            }
            ("Service", "ProtectHostname") if yes(d) => {
                opt(&mut p, &["--uts"]);
                implied_deny.push(expand_all(groups, &["sethostname", "setdomainname"]));
            }
            ("Service", "ProtectProc") if v == "invisible" => proc_opts.push("hidepid=invisible"),
            ("Service", "ProcSubset") if v == "pid" => proc_opts.push("subset=pid"),
            ("Service", "RestrictAddressFamilies") => {
                assert!(
                    !v.starts_with('~'),
                    "only an allow-list of families is emulated"
                );
                let families = v.split_whitespace().collect::<Vec<_>>().join(",");
                opt(&mut p, &["--families", &families]);
            }
            ("Service", "RestrictNamespaces") if yes(d) => opt(&mut p, &["--restrict-ns"]),
            ("Service", "RestrictRealtime") if yes(d) => opt(&mut p, &["--restrict-realtime"]),
            ("Service", "RestrictSUIDSGID") if yes(d) => opt(&mut p, &["--restrict-suid"]),
            ("Service", "LockPersonality") if yes(d) => opt(&mut p, &["--lock-personality"]),
            ("Service", "MemoryDenyWriteExecute") if yes(d) => opt(&mut p, &["--mdwe"]),
            ("Service", "KeyringMode") if v == "private" => opt(&mut p, &["--keyring"]),
            ("Service", "SystemCallArchitectures") if v == "native" => {
                // The harness's filters hold the native ABI only; a call
                // through another ABI (x32, i386) kills the process.
            }
            ("Service", "SystemCallFilter") => {
                let (invert, list) = match v.strip_prefix('~') {
                    Some(rest) => (true, rest),
                    None => (false, v),
                };
                let items: Vec<&str> = list.split_whitespace().collect();
                let set = expand_all(groups, &items);
                match (&mut allowed, invert) {
                    (None, false) => {
                        let mut start = expand_all(groups, &["@default"]);
                        start.extend(set);
                        allowed = Some(start);
                    }
                    (Some(a), false) => a.extend(set),
                    (Some(a), true) => a.retain(|s| !set.contains(s)),
                    (None, true) => panic!("a deny-list SystemCallFilter is not emulated"),
                }
            }
            ("Service", "SystemCallErrorNumber") => {
                let errno = match v {
                    "EPERM" => libc::EPERM,
                    "EACCES" => libc::EACCES,
                    "ENOSYS" => libc::ENOSYS,
                    other => panic!("SystemCallErrorNumber={other} not known to the harness"),
                };
                opt(&mut p, &["--errno", &errno.to_string()]);
            }
            _ => handled = false,
        }
        if handled {
            p.emulated.push(format!("{}={}", d.key, d.value));
        } else if let Some((_, why)) = NOT_EMULATED.iter().find(|(k, _)| *k == d.key) {
            p.not_emulated.push((format!("{}={}", d.key, d.value), why));
        } else {
            panic!(
                "[{}] {}={} is neither emulated by tests/sandbox.rs nor listed in NOT_EMULATED",
                d.section, d.key, d.value
            );
        }
    }
    if !proc_opts.is_empty() {
        opt(&mut p, &["--proc", &proc_opts.join(",")]);
    }
    for deny in implied_deny {
        let list = deny.into_iter().collect::<Vec<_>>().join(",");
        opt(&mut p, &["--deny-syscalls", &list]);
    }
    if let Some(allowed) = allowed {
        let list = allowed.into_iter().collect::<Vec<_>>().join(",");
        opt(&mut p, &["--allow-syscalls", &list]);
    }
    let user = user.expect("User= in the unit");
    assert_eq!(
        group.as_deref(),
        Some(user.as_str()),
        "Group= is the user's group"
    );
    let (uid, gid) = (p.users.uid.to_string(), p.users.gid.to_string());
    opt(&mut p, &["--uid", &uid, "--gid", &gid]);
    // The environment systemd gives a system service.
    let base = [
        (
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_string(),
        ),
        ("HOME", p.users.home.clone()),
        ("LOGNAME", user.clone()),
        ("USER", user.clone()),
        ("SHELL", p.users.shell.clone()),
        (
            "INVOCATION_ID",
            "0123456789abcdef0123456789abcdef".to_string(),
        ),
    ];
    let mut env: Vec<(String, String)> = base
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    env.append(&mut p.env);
    p.env = env;
    p
}

fn unit_text() -> String {
    std::fs::read_to_string(UNIT).expect("systemd/grove.service")
}

/// The harness compiled against libseccomp.
struct Harness {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

/// Builds the harness; None (with a skip) where gcc, libseccomp-dev, root
/// or namespaces are missing.
fn harness() -> Option<Harness> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip("the unit sandbox harness needs root (user mapping, mounts)");
        return None;
    }
    let probe = Command::new("unshare")
        .args(["--mount", "--net", "true"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        skip("unshare --mount --net is not permitted here");
        return None;
    }
    // One build per test (about 0.2 s), in its own directory.
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("unit_sandbox");
    let built = Command::new("gcc")
        .args(["-O1", "-Wall", "-Wextra", "-o"])
        .arg(&out)
        .arg(HARNESS_SOURCE)
        .arg("-lseccomp")
        .output();
    match built {
        Ok(o) if o.status.success() => Some(Harness {
            _dir: dir,
            path: out,
        }),
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            if err.contains("seccomp.h") {
                skip("libseccomp-dev is not installed (apt-get install libseccomp-dev)");
                None
            } else {
                panic!("the harness does not build:\n{err}");
            }
        }
        Err(_) => {
            skip("gcc is not installed");
            None
        }
    }
}

fn groups_or_skip() -> Option<BTreeMap<String, Vec<String>>> {
    let groups = syscall_groups();
    if groups.is_none() {
        skip("systemd-analyze syscall-filter is not available (apt-get install systemd)");
    }
    groups
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A sandboxed service running in its own emulated machine.
struct Machine {
    _dir: tempfile::TempDir,
    child: Child,
    notify: UnixDatagram,
    pidfile: PathBuf,
    stdout: PathBuf,
    stderr: PathBuf,
    main_pid: Option<i32>,
}

impl Machine {
    /// Prepares the machine for `p` (overlays, users, directories, the
    /// notify socket, the binaries) and starts the service: `program`
    /// replaces the unit's ExecStart when given.
    fn start(harness: &Path, p: &Plan, program: Option<&[&str]>) -> Machine {
        Machine::start_with_setup(harness, p, program, &[])
    }

    /// Like `start`, with shell lines run as the machine's root after the
    /// unit's directories exist (files an operator would install).
    fn start_with_setup(
        harness: &Path,
        p: &Plan,
        program: Option<&[&str]>,
        setup: &[String],
    ) -> Machine {
        let dir = tempfile::tempdir().expect("tempdir");
        let t = dir.path();
        std::fs::write(t.join("passwd"), &p.users.passwd).unwrap();
        std::fs::write(t.join("group"), &p.users.group).unwrap();
        let notify_path = t.join("notify.sock");
        let notify = UnixDatagram::bind(&notify_path).expect("notify socket");
        // The service user must be able to send to it.
        std::fs::set_permissions(&notify_path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let one: libc::c_int = 1;
        // SAFETY: setsockopt on our own socket with a valid int.
        let rc = unsafe {
            libc::setsockopt(
                notify.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PASSCRED,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "SO_PASSCRED");
        let stage = t.join("stage");
        std::fs::create_dir(&stage).unwrap();
        let q = |p: &Path| shell_quote(p.to_str().expect("utf-8 path"));
        let mut script = vec![
            "set -eu".to_string(),
            // The machine's own mounts: nothing below reaches the host.
            format!("mount -t tmpfs -o mode=0700 tmpfs {}", q(&stage)),
        ];
        for (name, lower) in [
            ("etc", "/etc"),
            ("usrbin", "/usr/bin"),
            ("usrlib", "/usr/lib"),
            ("varlib", "/var/lib"),
        ] {
            let up = stage.join(format!("{name}.up"));
            let work = stage.join(format!("{name}.work"));
            script.push(format!("mkdir {} {}", q(&up), q(&work)));
            script.push(format!(
                "mount -t overlay overlay -o lowerdir={lower},upperdir={},workdir={} {lower}",
                up.display(),
                work.display()
            ));
        }
        script.extend([
            "mount -t tmpfs -o mode=0755 tmpfs /run".to_string(),
            "mount -t tmpfs -o mode=0755 tmpfs /home".to_string(),
            // systemd-sysusers, from grove.sysusers.
            format!("cat {} > /etc/passwd", q(&t.join("passwd"))),
            format!("cat {} > /etc/group", q(&t.join("group"))),
            "install -d -o alice -g alice -m 0700 /home/alice".to_string(),
            "install -d -o bob -g bob -m 0700 /home/bob".to_string(),
            // The binaries, installed where the unit and the guide put them.
            format!(
                "touch {0} && mount --bind {1} {0}",
                p.exec_start[0],
                env!("CARGO_BIN_EXE_grove")
            ),
            // llama.cpp's libraries, where the package puts them.
            format!(
                "mkdir -p /usr/lib/grove && cp {0}/libllama.so.* {0}/libggml*.so* /usr/lib/grove/",
                q(Path::new(env!("CARGO_BIN_EXE_grove"))
                    .parent()
                    .expect("the binary's folder"))
            ),
            format!("touch {PROBE} && mount --bind {} {PROBE}", q(harness)),
            // The manager's notify socket.
            "mkdir -p /run/systemd && touch /run/systemd/notify".to_string(),
            format!("mount --bind {} /run/systemd/notify", q(&notify_path)),
        ]);
        for (path, mode, owned) in &p.directories {
            let owner = if *owned { "-o grove -g grove" } else { "" };
            script.push(format!("install -d {owner} -m {mode} {path}"));
        }
        script.extend(setup.iter().cloned());
        let pidfile = t.join("main.pid");
        let mut exec = vec![
            q(harness),
            "run".into(),
            "--loopback-up".into(),
            "--pidfile".into(),
            q(&pidfile),
        ];
        exec.extend(p.harness.iter().map(|a| shell_quote(a)));
        for (k, v) in &p.env {
            exec.push("--env".into());
            exec.push(shell_quote(&format!("{k}={v}")));
        }
        exec.push("--".into());
        match program {
            Some(argv) => exec.extend(argv.iter().map(|a| shell_quote(a))),
            None => exec.extend(p.exec_start.iter().map(|a| shell_quote(a))),
        }
        script.push(format!("exec {}", exec.join(" ")));
        let stderr = t.join("stderr");
        let stdout = t.join("stdout");
        let child = Command::new("unshare")
            .args(["--mount", "--net", "--propagation", "private", "sh", "-c"])
            .arg(script.join("\n"))
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("unshare");
        Machine {
            _dir: dir,
            child,
            notify,
            pidfile,
            stdout,
            stderr,
            main_pid: None,
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The service's pid, once the harness wrote it.
    fn main_pid(&mut self) -> i32 {
        if let Some(pid) = self.main_pid {
            return pid;
        }
        let start = Instant::now();
        loop {
            if let Ok(text) = std::fs::read_to_string(&self.pidfile) {
                let pid = text.trim().parse().expect("a pid");
                self.main_pid = Some(pid);
                return pid;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "the harness exited ({status}) before starting the service:\n{}",
                    self.stderr()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "no main pid:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The next notification and its sender's pid, within `limit`.
    fn notification(&self, limit: Duration) -> Option<(i32, String)> {
        self.notify.set_read_timeout(Some(limit)).unwrap();
        let mut buf = [0u8; 4096];
        let mut control = [0u8; 128];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: msghdr is plain data; every pointer set below outlives the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len() as _;
        // SAFETY: recvmsg into the buffers described by msg.
        let n = unsafe { libc::recvmsg(self.notify.as_raw_fd(), &mut msg, 0) };
        if n < 0 {
            return None;
        }
        let mut pid = -1;
        // SAFETY: walking the control messages the kernel wrote into `control`.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET
                    && (*cmsg).cmsg_type == libc::SCM_CREDENTIALS
                {
                    let cred: libc::ucred = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                    pid = cred.pid;
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        Some((
            pid,
            String::from_utf8_lossy(&buf[..n as usize]).into_owned(),
        ))
    }

    /// Waits for a notification containing `want`; every datagram must come
    /// from the main process (NotifyAccess=main).
    fn expect_notification(&mut self, want: &str, limit: Duration) -> Duration {
        let main = self.main_pid();
        let start = Instant::now();
        loop {
            assert!(
                start.elapsed() < limit,
                "no {want} within {limit:?}:\n{}",
                self.stderr()
            );
            // In short slices, so that a service that died is seen at once.
            let Some((pid, text)) = self.notification(Duration::from_millis(200)) else {
                if let Some(status) = self.child.try_wait().unwrap() {
                    panic!(
                        "the service exited ({status}) before {want}:\n{}",
                        self.stderr()
                    );
                }
                continue;
            };
            assert_eq!(pid, main, "notification {text:?} not from the main process");
            if text.lines().any(|l| l == want) {
                return start.elapsed();
            }
        }
    }

    /// Runs a command in the machine (not in the service's namespaces) as
    /// `user`, with their groups and a login environment.
    fn as_user(&self, user: &str, env: &[(&str, &str)], argv: &[&str]) -> std::process::Output {
        let target = self.child.id().to_string();
        let mut cmd = Command::new("nsenter");
        cmd.args(["--target", &target, "--mount", "--net", "--"])
            .args([
                "setpriv",
                "--reuid",
                user,
                "--regid",
                user,
                "--init-groups",
                "--reset-env",
                "--",
            ])
            .arg("env");
        for (k, v) in env {
            cmd.arg(format!("{k}={v}"));
        }
        cmd.args(argv)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
        cmd.output().expect("nsenter")
    }

    /// Waits for the harness to exit; returns the service's exit code.
    fn wait(&mut self, limit: Duration) -> i32 {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            if start.elapsed() > limit {
                let _ = self.child.kill();
                panic!(
                    "the service did not exit within {limit:?}:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            match self.main_pid {
                // SAFETY: the service we started; the harness then exits.
                Some(pid) => unsafe {
                    libc::kill(pid, libc::SIGKILL);
                },
                None => {
                    let _ = self.child.kill();
                }
            }
            let _ = self.child.wait();
        }
    }
}

fn host_users() -> Users {
    sysusers(
        &std::fs::read_to_string(SYSUSERS).expect("grove.sysusers"),
        &std::fs::read_to_string("/etc/passwd").unwrap_or_default(),
        &std::fs::read_to_string("/etc/group").unwrap_or_default(),
    )
}

fn unit_plan() -> Option<Plan> {
    let groups = groups_or_skip()?;
    Some(plan(&parse_unit(&unit_text()), &groups, host_users()))
}

/// Every directive of the unit is emulated or listed; the list is printed.
#[test]
fn every_unit_directive_is_emulated_or_listed() {
    let Some(p) = unit_plan() else { return };
    println!("emulated by tests/support/unit_sandbox.c:");
    for d in &p.emulated {
        println!("  {d}");
    }
    println!("not emulated:");
    for (d, why) in &p.not_emulated {
        println!("  {d}: {why}");
    }
    let listed: BTreeSet<&str> = NOT_EMULATED.iter().map(|(k, _)| *k).collect();
    let in_unit: BTreeSet<String> = parse_unit(&unit_text())
        .into_iter()
        .map(|d| d.key)
        .collect();
    for key in listed {
        assert!(
            in_unit.contains(key),
            "NOT_EMULATED lists {key}, which the unit does not use"
        );
    }
    assert_eq!(
        p.emulated.len() + p.not_emulated.len(),
        parse_unit(&unit_text()).len()
    );
    // The allow-list is systemd's: @system-service without @privileged and
    // @resources, so chown and setrlimit are out and openat is in.
    let allow = p
        .harness
        .iter()
        .skip_while(|a| *a != "--allow-syscalls")
        .nth(1)
        .expect("an allow-list");
    let allow: BTreeSet<&str> = allow.split(',').collect();
    for call in ["openat", "socket", "execve", "futex", "epoll_wait"] {
        assert!(allow.contains(call), "{call} not allowed");
    }
    for call in [
        "chown",
        "setrlimit",
        "mount",
        "chroot",
        "reboot",
        "init_module",
    ] {
        assert!(!allow.contains(call), "{call} allowed");
    }
}

/// A probe run as the unit's service sees each directive take effect.
#[test]
fn the_sandbox_enforces_the_units_directives() {
    let Some(p) = unit_plan() else { return };
    let Some(harness) = harness() else { return };
    let mut m = Machine::start(&harness.path, &p, Some(&[PROBE, "probe"]));
    let code = m.wait(Duration::from_secs(60));
    let out = std::fs::read_to_string(&m.stdout).expect("probe output");
    assert_eq!(code, 0, "probe failed:\n{}\n{out}", m.stderr());
    let seen: BTreeMap<&str, &str> = out.lines().filter_map(|l| l.split_once('=')).collect();
    let uid = p.users.uid.to_string();
    let gid = p.users.gid.to_string();
    let pid = m.main_pid().to_string();
    let expected: &[(&str, &str, &str)] = &[
        ("uid", &uid, "User="),
        ("gid", &gid, "Group="),
        ("groups", "0", "User= (no supplementary groups)"),
        ("umask", "0007", "UMask="),
        ("CapEff", "0000000000000000", "User= without capabilities"),
        ("CapPrm", "0000000000000000", "User= without capabilities"),
        ("CapBnd", "0000000000000000", "CapabilityBoundingSet="),
        ("CapAmb", "0000000000000000", "AmbientCapabilities="),
        ("NoNewPrivs", "1", "NoNewPrivileges="),
        ("Seccomp", "2", "seccomp filters"),
        ("socket_unix", "ok", "RestrictAddressFamilies="),
        ("socket_inet", "ok", "RestrictAddressFamilies="),
        ("socket_inet6", "ok", "RestrictAddressFamilies="),
        (
            "socket_netlink",
            "ok",
            "RestrictAddressFamilies= (AF_NETLINK for libp2p's interface watcher)",
        ),
        ("socket_packet", "EAFNOSUPPORT", "RestrictAddressFamilies="),
        ("socket_vsock", "EAFNOSUPPORT", "RestrictAddressFamilies="),
        ("mmap_wx", "EPERM", "MemoryDenyWriteExecute="),
        ("mprotect_x", "EPERM", "MemoryDenyWriteExecute="),
        ("unshare_user", "EPERM", "RestrictNamespaces="),
        ("unshare_net", "EPERM", "RestrictNamespaces="),
        ("setns", "EPERM", "RestrictNamespaces="),
        ("personality_linux32", "EPERM", "LockPersonality="),
        ("sched_fifo", "EPERM", "RestrictRealtime=, ~@resources"),
        ("chroot", "EPERM", "~@privileged"),
        ("mount", "EPERM", "@system-service has no @mount"),
        ("setrlimit", "EPERM", "~@resources"),
        ("sethostname", "EPERM", "ProtectHostname="),
        ("clock_settime", "EPERM", "ProtectClock="),
        ("syslog", "EPERM", "ProtectKernelLogs="),
        ("init_module", "EPERM", "ProtectKernelModules="),
        ("iopl", "EPERM", "PrivateDevices= (@raw-io)"),
        ("chown_self", "EPERM", "~@privileged (@chown)"),
        ("chmod_suid", "EPERM", "RestrictSUIDSGID="),
        ("write_usr", "EROFS", "ProtectSystem=strict"),
        ("write_etc", "EROFS", "ProtectSystem=strict"),
        (
            "write_config",
            "EROFS",
            "ConfigurationDirectory= is read-only",
        ),
        ("write_state", "ok", "StateDirectory="),
        ("write_runtime", "ok", "RuntimeDirectory="),
        ("write_tmp", "ok", "PrivateTmp="),
        ("write_var_tmp", "ok", "PrivateTmp="),
        ("tmp", "", "PrivateTmp= (empty, not the host's /tmp)"),
        ("write_sys", "EROFS", "ProtectKernelTunables="),
        ("write_dev_shm", "ok", "PrivateDevices= (/dev/shm)"),
        ("home", "EACCES", "ProtectHome="),
        ("root", "EACCES", "ProtectHome="),
        ("proc_cpuinfo", "ENOENT", "ProcSubset=pid"),
        ("proc_sys", "ENOENT", "ProcSubset=pid"),
        (
            "proc_pids",
            &pid,
            "ProtectProc=invisible (only its own process)",
        ),
        ("pid", &pid, "the main process"),
    ];
    let mut wrong = Vec::new();
    for (key, want, directive) in expected {
        let got = seen.get(key).copied().unwrap_or("<missing>");
        if got != *want {
            wrong.push(format!("{key}: {got:?}, want {want:?} ({directive})"));
        }
    }
    let mut dev: Vec<&str> = seen.get("dev").copied().unwrap_or("").split(' ').collect();
    dev.sort_unstable();
    let want_dev = [
        "fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout", "tty",
        "urandom", "zero",
    ];
    if dev != want_dev {
        wrong.push(format!("dev: {dev:?}, want {want_dev:?} (PrivateDevices=)"));
    }
    assert!(
        wrong.is_empty(),
        "the sandbox differs from the unit:\n{}\n\nprobe said:\n{out}",
        wrong.join("\n")
    );
}

/// The unit's daemon, default config, under its sandbox: READY=1, watchdog
/// pings, `grove node status` for a grove-group operator over
/// /run/grove/grove.sock (refused to one outside the group), and SIGTERM
/// answered with STOPPING=1 and a clean exit within TimeoutStopSec.
#[test]
fn the_daemon_runs_under_the_units_sandbox_with_the_default_config() {
    let Some(p) = unit_plan() else { return };
    let Some(harness) = harness() else { return };
    let mut m = Machine::start(&harness.path, &p, None);
    let main = m.main_pid();
    // No /etc/grove/grove.toml, no flags: the default config.
    let ready = m.expect_notification("READY=1", Duration::from_secs(60));
    let watchdog = p.watchdog.expect("WatchdogSec= in the unit");
    let ping = m.expect_notification("WATCHDOG=1", watchdog);
    let again = m.expect_notification("WATCHDOG=1", watchdog);
    println!(
        "READY=1 after {ready:?}; watchdog pings {ping:?} and {again:?} apart (WatchdogSec={watchdog:?})"
    );
    // The operator's command, with no flags: the CLI finds the system
    // daemon at /run/grove/grove.sock.
    let groups = m.as_user("alice", &[], &["id", "-nG"]);
    let groups = String::from_utf8_lossy(&groups.stdout);
    assert!(
        groups.split_whitespace().any(|g| g == "grove"),
        "alice's groups: {groups}"
    );
    let status = m.as_user("alice", &[], &["grove", "node", "status", "--json"]);
    assert!(
        status.status.success(),
        "grove node status for a grove-group operator:\n{}\n{}\ndaemon:\n{}",
        String::from_utf8_lossy(&status.stderr),
        String::from_utf8_lossy(&status.stdout),
        m.stderr()
    );
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).expect("status JSON");
    assert_eq!(status["pid"], main, "{status}");
    assert_eq!(status["state_dir"], "/var/lib/grove", "{status}");
    let listen: Vec<&str> = status["listen"]
        .as_array()
        .expect("listen")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(
        listen.iter().any(|a| a.ends_with("/tcp/4100")),
        "the default listen port: {listen:?}"
    );
    let outsider = m.as_user("bob", &[], &["grove", "node", "status", "--json"]);
    assert!(
        !outsider.status.success(),
        "bob is not in group grove yet was answered"
    );
    // SIGTERM, as systemctl stop sends it.
    // SAFETY: signalling the service we started.
    assert_eq!(unsafe { libc::kill(main, libc::SIGTERM) }, 0);
    m.expect_notification("STOPPING=1", p.stop_timeout);
    let code = m.wait(p.stop_timeout);
    assert_eq!(code, 0, "exit after SIGTERM:\n{}", m.stderr());
}

/// The harness catches the failure issue 13 found: without AF_NETLINK the
/// default listen address cannot start (libp2p's interface watcher), and
/// the daemon exits 1 before READY=1, naming the OS error.
#[test]
fn without_af_netlink_the_default_config_does_not_start() {
    let Some(groups) = groups_or_skip() else {
        return;
    };
    let Some(harness) = harness() else { return };
    let unit = unit_text();
    let families = unit
        .lines()
        .find(|l| l.starts_with("RestrictAddressFamilies="))
        .expect("RestrictAddressFamilies= in the unit");
    assert!(families.contains("AF_NETLINK"), "{families}");
    let without: String = families
        .split_whitespace()
        .filter(|f| *f != "AF_NETLINK")
        .collect::<Vec<_>>()
        .join(" ");
    let p = plan(
        &parse_unit(&unit.replace(families, &without)),
        &groups,
        host_users(),
    );
    let mut m = Machine::start(&harness.path, &p, None);
    let main = m.main_pid();
    let code = m.wait(Duration::from_secs(60));
    assert_eq!(code, 1, "{}", m.stderr());
    while let Some((pid, text)) = m.notification(Duration::from_millis(1)) {
        assert_eq!(pid, main);
        assert!(!text.contains("READY=1"), "READY=1 without AF_NETLINK");
    }
    let err = m.stderr();
    assert!(err.contains("Address family not supported"), "{err}");
}

/// A `[hooks]` program runs inside the service's sandbox: as the service
/// user, with the event in its environment, able to write the state
/// directory and nothing of the system (docs/operator-guide.md, "Hooks").
#[test]
fn a_hook_runs_under_the_units_sandbox() {
    let Some(p) = unit_plan() else { return };
    let Some(harness) = harness() else { return };
    let out = "/var/lib/grove/hook.out";
    let hook = format!(
        "#!/bin/sh\n\
         {{\n\
         echo \"event=$GROVE_EVENT epoch=$GROVE_EVENT_EPOCH name=$GROVE_EVENT_NAME\"\n\
         echo \"uid=$(id -un)\"\n\
         touch /etc/grove/written 2>/dev/null && echo etc=writable || echo etc=read-only\n\
         touch /usr/bin/written 2>/dev/null && echo usr=writable || echo usr=read-only\n\
         ls /home/alice >/dev/null 2>&1 && echo home=visible || echo home=hidden\n\
         }} >> {out}\n"
    );
    let setup = vec![
        format!("printf '%s' {} > /etc/grove/hook.sh", shell_quote(&hook)),
        "chmod 0755 /etc/grove/hook.sh".to_string(),
        // The operator's config, where the unit's daemon reads it.
        format!(
            "printf '%s' {} > /etc/grove/grove.toml",
            shell_quote(
                "[hooks]\nprogram = \"/etc/grove/hook.sh\"\nevents = [\"joined\"]\ntimeout_secs = 5\n"
            )
        ),
    ];
    let mut m = Machine::start_with_setup(&harness.path, &p, None, &setup);
    let main = m.main_pid();
    m.expect_notification("READY=1", Duration::from_secs(60));
    let init = m.as_user(
        "alice",
        &[],
        &[
            "grove",
            "mesh",
            "init",
            "--name",
            "sandboxed",
            "--as",
            "hooked",
        ],
    );
    assert!(
        init.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&init.stderr),
        m.stderr()
    );
    let start = Instant::now();
    let seen = loop {
        let cat = m.as_user("alice", &[], &["cat", out]);
        let text = String::from_utf8_lossy(&cat.stdout).into_owned();
        if text.contains("home=") {
            break text;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the hook did not run:\n{}",
            m.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    println!("the hook under the sandbox wrote:\n{seen}");
    for want in [
        "event=joined epoch=0 name=hooked",
        "uid=grove",
        "etc=read-only",
        "usr=read-only",
        "home=hidden",
    ] {
        assert!(seen.contains(want), "{want} not in:\n{seen}");
    }
    // The hook writes its file before it exits, and the daemon logs
    // "hook ran" only once it has exited: wait for the log line too.
    let start = Instant::now();
    while !m.stderr().contains("hook ran") {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the daemon did not log the hook's run:\n{}",
            m.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: signalling the service we started.
    assert_eq!(unsafe { libc::kill(main, libc::SIGTERM) }, 0);
    assert_eq!(m.wait(p.stop_timeout), 0, "{}", m.stderr());
}
