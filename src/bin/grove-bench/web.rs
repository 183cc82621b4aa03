//! `grove-bench web [RUNS]`: first contentful paint of a finished 100-turn
//! moot's page (`/moots/ID`), measured by a headless Chromium over the
//! DevTools protocol (`cdp`): three real nodes on 127.0.0.1 with the
//! instant model, the host serving its web pages on a loopback port; each
//! run loads the page with the browser's cache cleared and reads the
//! page's paint timing. Goal: under 200 ms.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;

use super::cdp::{Browser, chromium_binary};
use super::moot_net::{book, instant_model, run_moot};
use super::net::{grove, grove_bin, join, json, percentile, start_with, wait_until};

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let runs: usize = args.first().map(|s| s.parse()).transpose()?.unwrap_or(7);
    let chromium = chromium_binary().context("no chromium on PATH (Debian's chromium package)")?;
    let bin = grove_bin()?;
    let root = tempfile::tempdir()?;
    let url = instant_model()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let env = [
        ("GROVE_MODEL__BACKEND", "openai".to_string()),
        ("GROVE_MODEL__URL", url),
        // The instant model speaks faster than the default turn rate limit.
        ("GROVE_NET__RATE__TURN", "600".to_string()),
    ];
    let mut host_env = env.to_vec();
    host_env.push(("GROVE_HTTP__LISTEN", format!("127.0.0.1:{port}")));
    println!(
        "grove-bench web: a 100-turn moot on three nodes (instant model), its page in headless chromium"
    );
    let n3 = start_with(&bin, root.path(), 3, &host_env)?;
    json(&bin, &n3.state, &["mesh", "init", "--name", "bench"])?;
    let n1 = start_with(&bin, root.path(), 1, &env)?;
    join(&bin, std::slice::from_ref(&n3), &n1)?;
    let n2 = start_with(&bin, root.path(), 2, &env)?;
    let members = [n3, n1];
    join(&bin, &members, &n2)?;
    let result = bench(&bin, root.path(), &chromium, port, runs);
    drop(n2);
    drop(members);
    result
}

fn bench(bin: &Path, root: &Path, chromium: &Path, port: u16, runs: usize) -> anyhow::Result<()> {
    let state = |k: usize| root.join(format!("node{k}"));
    for (k, key) in [(1, "bench/one"), (2, "bench/two")] {
        let path = book(root, k)?;
        let out = grove(
            bin,
            &state(k),
            &["book", "add", path.to_str().context("path")?, "--key", key],
        )
        .output()?;
        if !out.status.success() {
            bail!("book add: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    wait_until("node3 to see both books", Duration::from_secs(60), || {
        json(bin, &state(3), &["roots"]).is_ok_and(|v| {
            let t = v.to_string();
            t.contains("bench/one") && t.contains("bench/two")
        })
    })?;
    let (id, _) = run_moot(bin, &state(3), &["node1:bench/one", "node2:bench/two"], 100)?;
    let page = format!("http://127.0.0.1:{port}/moots/{id}");

    let mut browser = Browser::launch(chromium, 1000, 1300)?;
    browser.call("Network.enable", json!({}))?;
    browser.call("Network.setCacheDisabled", json!({"cacheDisabled": true}))?;
    // The first load: the node renders the page (later loads get it from
    // the node's cache of finished pages); it also warms the browser's own
    // start-up (fonts, processes), so it is reported apart.
    browser.navigate(&page)?;
    let first = paint_and_answer(&mut browser)?;
    let mut fcp = Vec::new();
    let mut load = Vec::new();
    let mut ttfb = Vec::new();
    for _ in 0..runs {
        browser.call("Network.clearBrowserCache", json!({}))?;
        let t0 = Instant::now();
        browser.navigate(&page)?;
        load.push(t0.elapsed().as_secs_f64() * 1000.0);
        let (paint, served) = paint_and_answer(&mut browser)?;
        fcp.push(paint);
        ttfb.push(served);
    }
    let size = browser.eval("document.documentElement.outerHTML.length")?;
    let turns = browser.eval("document.querySelectorAll('#turns .turn').length")?;
    let panels = browser.eval("document.querySelectorAll('section.proof').length")?;
    fcp.sort_by(f64::total_cmp);
    load.sort_by(f64::total_cmp);
    ttfb.sort_by(f64::total_cmp);
    println!(
        "first contentful paint of a finished {turns}-turn moot's page ({} KB of HTML, {panels} proof panels), {runs} cold loads: p50 {:.0} ms, max {:.0} ms (goal < 200 ms); of it the node's answer (request to first byte) p50 {:.0} ms; load event p50 {:.0} ms",
        size.as_u64().unwrap_or(0) / 1024,
        percentile(&fcp, 0.5),
        fcp.last().copied().unwrap_or(0.0),
        percentile(&ttfb, 0.5),
        percentile(&load, 0.5),
    );
    println!(
        "the first load (the node renders the page; later loads come from its cache of finished pages): first contentful paint {:.0} ms, the node's answer {:.0} ms",
        first.0, first.1
    );
    Ok(())
}

/// The loaded page's first contentful paint and the node's share of it
/// (request sent to the answer's first byte), in ms.
fn paint_and_answer(browser: &mut Browser) -> anyhow::Result<(f64, f64)> {
    // The paint entry may come just after the load event.
    let paint = browser.eval(
        "new Promise(done => { \
           const seen = l => { const e = l.find(x => x.name === 'first-contentful-paint'); if (e) done(e.startTime); }; \
           new PerformanceObserver(l => seen(l.getEntries())).observe({type: 'paint', buffered: true}); \
           setTimeout(() => done(null), 5000); })",
    )?;
    let served = browser.eval(
        "(n => n.responseStart - n.requestStart)(performance.getEntriesByType('navigation')[0])",
    )?;
    Ok((
        paint.as_f64().context("no first-contentful-paint entry")?,
        served.as_f64().unwrap_or(f64::NAN),
    ))
}
