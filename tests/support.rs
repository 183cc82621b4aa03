//! Shared test helpers: the shared spec directory, the real binary, temp state.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `../shared` beside the repository (or `$GROVE_SHARED_DIR`), when present.
pub fn shared_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("GROVE_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"));
    dir.is_dir().then_some(dir)
}

/// A file under the shared directory, or `None` with a printed skip notice.
pub fn shared_file(rel: &str) -> Option<PathBuf> {
    match shared_dir().map(|d| d.join(rel)).filter(|p| p.exists()) {
        Some(p) => Some(p),
        None => {
            eprintln!("SKIP: shared file {rel} not present (set GROVE_SHARED_DIR)");
            None
        }
    }
}

/// A temporary state directory and a way to run `grove` against it.
pub struct Grove {
    pub dir: tempfile::TempDir,
}

impl Grove {
    pub fn new() -> Grove {
        Grove {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    pub fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// A command for the real binary with this state dir and a clean env.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_grove"));
        cmd.arg("--state").arg(self.state()).args(args);
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("GROVE_") {
                cmd.env_remove(k);
            }
        }
        cmd.env_remove("STATE_DIRECTORY");
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("run grove")
    }

    /// Runs and requires success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "grove {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8(out.stdout).expect("utf-8 stdout")
    }

    /// Runs with `--json` appended and parses stdout.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = args.to_vec();
        all.push("--json");
        let out = self.ok(&all);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("bad JSON from {args:?}: {e}\n{out}"))
    }

    /// Runs and requires failure; returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            !out.status.success(),
            "grove {args:?} unexpectedly succeeded"
        );
        String::from_utf8(out.stderr).expect("utf-8 stderr")
    }

    pub fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, bytes).expect("write input");
        p
    }
}
