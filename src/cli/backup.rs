//! `grove backup DEST`: a consistent copy of the state directory (databases
//! and keys) into a new directory.

use std::io::{self, Write};

use super::{Ctx, Show};
use grove::api::dto;

pub fn backup(ctx: &Ctx, dest: &std::path::Path) -> anyhow::Result<()> {
    let report = grove::backup::backup(&ctx.state_dir, dest)?;
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
