//! Compiles every `proto/*.proto` (at the repository's root) into Rust with
//! prost, using protox (pure Rust) so no system `protoc` is needed. New
//! protos just drop into `proto/`.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_dir = PathBuf::from("../../proto");
    println!("cargo:rerun-if-changed=../../proto");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&proto_dir)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|ext| ext == "proto"))
        .collect();
    // Sorted so the generated code does not depend on directory order.
    files.sort();
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
    }
    let descriptors = protox::compile(&files, [&proto_dir])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
