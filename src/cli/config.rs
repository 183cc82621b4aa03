//! `grove config check`: validates the effective configuration (file,
//! `GROVE_*` environment, defaults) without starting anything, with the
//! same check a node's start runs, and prints it; a problem names its file,
//! key or variable.

use std::io::{self, Write};
use std::path::Path;

use clap::Subcommand;
use grove::api::dto;
use grove::config::{DEFAULT_CONFIG_FILE, Overrides, Settings};

use super::{Show, print_json};

#[derive(Subcommand)]
pub enum ConfigCmd {
    /// Validate the effective configuration (--config FILE, GROVE_* variables,
    /// defaults) with the checks of `grove node run`'s start, and print every
    /// key with its value; exits 1 naming the file, key or variable of the
    /// first problem. Run it as the node's user: `hooks.program` must be
    /// executable by that user.
    Check,
}

pub fn run(cmd: ConfigCmd, file: Option<&Path>, json: bool) -> anyhow::Result<()> {
    match cmd {
        ConfigCmd::Check => {
            let config = Settings::load(file)?.check(Overrides::default())?;
            config.check_start()?;
            let read = match file {
                Some(f) => Some(f.display().to_string()),
                None => Path::new(DEFAULT_CONFIG_FILE)
                    .is_file()
                    .then(|| DEFAULT_CONFIG_FILE.to_string()),
            };
            let mut environment: Vec<String> = std::env::vars_os()
                .map(|(k, _)| k.to_string_lossy().into_owned())
                .filter(|k| k.starts_with("GROVE_"))
                .collect();
            environment.sort();
            let report = dto::ConfigReport {
                file: read,
                environment,
                ok: true,
                settings: config.settings().effective(),
            };
            if json {
                return print_json(&report);
            }
            report.text(&mut io::stdout().lock())?;
            Ok(())
        }
    }
}

/// `key = value` lines, dotted keys, in the settings' own order.
fn flatten(prefix: &str, v: &serde_json::Value, out: &mut dyn Write) -> io::Result<()> {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out)?;
            }
            Ok(())
        }
        other => writeln!(out, "{prefix} = {other}"),
    }
}

impl Show for dto::ConfigReport {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        match &self.file {
            Some(f) => writeln!(out, "config file: {f}")?,
            None => writeln!(out, "config file: none (defaults and environment)")?,
        }
        if !self.environment.is_empty() {
            writeln!(out, "environment: {}", self.environment.join(" "))?;
        }
        writeln!(out, "ok: the configuration is valid")?;
        flatten("", &self.settings, out)
    }
}
