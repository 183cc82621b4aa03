//! The `grove` binary: parses flags, loads settings, runs one command.

mod cli;

fn main() -> std::process::ExitCode {
    std::process::ExitCode::SUCCESS
}
