//! `grove backup DEST`: a consistent copy of the state directory (databases
//! and keys) into a new directory.

use std::io::{self, Write};

use super::{Ctx, Show};
use grove::api::dto;
use grove::api::routes;

pub fn backup(ctx: &Ctx, dest: &std::path::Path) -> anyhow::Result<()> {
    // The node a command reaches is the one to back up: beside the packaged
    // service, root's commands reach /run/grove/grove.sock while root's own
    // state directory holds nothing (the control socket's rules choose it,
    // so an explicit --state never picks another node's).
    let state_dir = match ctx.daemon_if_running() {
        Some(client) => {
            let info: dto::NodeInfo =
                client.request(hyper::Method::GET, routes::NODE, Vec::new())?;
            std::path::PathBuf::from(info.state_dir)
        }
        None => ctx.state_dir.clone(),
    };
    let report = grove::backup::backup(&state_dir, dest)?;
    ctx.show(&dto::BackupDone {
        dest: report.dest.display().to_string(),
        files: report.files,
        bytes: report.bytes,
    })
}

impl Show for dto::BackupDone {
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "backed up {} files ({} bytes) to {}",
            self.files.len(),
            self.bytes,
            self.dest
        )
    }
}
