//! Build script: puts llama.cpp's libraries where the grove binaries load
//! them. `llama-cpp-sys-2` builds `libllama.so` and `libggml*.so` and places
//! them beside the binaries in `target/<profile>/`; its CPU backends (one
//! `libggml-cpu-<variant>.so` per x86 variant, `DEP_LLAMA_BACKENDS_DIR`) are
//! copied there too, so that folder holds everything a binary needs (and
//! `deploy/build-deb.sh` packages it). The binaries look for libraries
//! beside themselves, or in `../lib/grove` when packaged.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rustc-link-arg=-Wl,-rpath,$ORIGIN:$ORIGIN/../lib/grove");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=DEP_LLAMA_BACKENDS_DIR");
    let (Some(backends), Some(profile_dir)) = (
        std::env::var_os("DEP_LLAMA_BACKENDS_DIR").map(PathBuf::from),
        profile_dir(),
    ) else {
        // The binaries still find the backends where the sys crate built
        // them (its `BACKENDS_DIR`), but a package would lack them.
        println!("cargo:warning=llama-cpp-sys-2 named no backends folder: nothing placed");
        return;
    };
    // The libraries the binaries link, under the names they ask for
    // (`libllama.so.0`: the real file, not the sys crate's symlinks).
    let libs = backends.with_file_name("lib");
    place(&libs, &profile_dir, |name| {
        (name.starts_with("libllama.so.") || name.starts_with("libggml"))
            && name.matches('.').count() == 2
            && name.contains(".so.")
    });
    // The CPU backends llama.cpp loads at run time.
    place(&backends, &profile_dir, |name| name.starts_with("libggml-"));
}

/// Puts each file of `from` whose name `wanted` takes into `to`: a hard
/// link to the real file (a copy where that fails).
fn place(from: &Path, to: &Path, wanted: impl Fn(&str) -> bool) {
    let Ok(entries) = std::fs::read_dir(from) else {
        println!("cargo:warning=no llama.cpp libraries in {}", from.display());
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        if !wanted(&name.to_string_lossy()) {
            continue;
        }
        let Ok(real) = std::fs::canonicalize(entry.path()) else {
            continue;
        };
        let target = to.join(&name);
        let _ = std::fs::remove_file(&target);
        if std::fs::hard_link(&real, &target).is_err()
            && let Err(e) = std::fs::copy(&real, &target)
        {
            println!(
                "cargo:warning=cannot copy {} to {}: {e}",
                real.display(),
                target.display()
            );
        }
    }
}

/// `target/<profile>/`: three levels above this script's `OUT_DIR`
/// (`target/<profile>/build/grove-<hash>/out`).
fn profile_dir() -> Option<PathBuf> {
    let out = PathBuf::from(std::env::var_os("OUT_DIR")?);
    out.ancestors().nth(3).map(Path::to_path_buf)
}
