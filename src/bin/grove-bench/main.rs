//! grove-bench: benchmarks that print figures (`grove-bench <area> [args]`).
//! Each area lives in its own file; run in release mode:
//! `cargo run --release --bin grove-bench -- store`.

mod admission;
mod ask;
mod cdp;
mod grounding;
mod mesh;
mod metrics;
mod model;
mod moot_net;
mod moot_turns;
mod nat;
mod net;
mod sim;
mod store;
mod web;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let area = args.first().map(String::as_str).unwrap_or("");
    let rest = args.get(1..).unwrap_or(&[]);
    match area {
        "admission" => admission::run(rest),
        "ask" => ask::run(rest),
        "grounding" => grounding::run(rest),
        "mesh" => mesh::run(rest),
        "metrics" => metrics::run(rest),
        "model" => model::run(rest),
        "net" => net::run(rest),
        "nat" => nat::run(rest),
        "moot-net" => moot_net::run(rest),
        "moot-turns" => moot_turns::run(rest),
        "store" => store::run(rest),
        "web" => web::run(rest),
        _ => {
            anyhow::bail!(
                "usage: grove-bench <area> [args]; areas: admission, ask, grounding, mesh, metrics, model, moot-net, moot-turns, nat, net, store, web"
            )
        }
    }
}
