//! The web pages (`daemon::control::web`) in a real headless Chromium (Debian's
//! `chromium`, driven over the DevTools protocol by `cdp`): the live moot
//! page following a three-node moot, its badges and proof panels, the
//! verify page against `grove moot verify`, and the listener's write rules
//! on the start form. Screenshots go to `target/web-screenshots/`.

use crate::support::free_port;
use std::path::PathBuf;
use std::time::Duration;

use prost::Message;
use serde_json::Value;

use crate::cdp::{Browser, chromium_binary};
use crate::cluster::Daemon;
use crate::scripted_openai::{RecordedRequest, Reply};
use crate::support::skip;

/// Where the screenshots are kept (a test artifact).
fn shots() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/web-screenshots")
}

fn browser() -> Option<Browser> {
    let Some(bin) = chromium_binary() else {
        skip("chromium (Debian's chromium package) is not installed");
        return None;
    };
    Some(Browser::launch(&bin, 1000, 1300).expect("chromium starts"))
}

/// Replies of the speakers: an opening quotes passage [s1] as it is
/// (verified); a reply misquotes [s1] by one word (kept after the retry,
/// then snapped) and quotes turn 1's own words as `[o1]`. Each takes a
/// moment, so the page is open before the turns land.
fn page_reply(req: &RecordedRequest) -> Reply {
    let Some(words) = req.first_passage() else {
        return Reply::text("The two books spoke of the sea and of work.");
    };
    // The opening's question asks what the speaker thinks; a reply's
    // quotes the friend's line and asks it to answer, challenge, extend...
    let opening = req.last_message().starts_with("What do you think");
    let text = if !opening {
        let mut near: Vec<String> = words[0..8.min(words.len())].to_vec();
        if near.len() > 4 {
            near[4] = "zzzword".into();
        }
        format!(
            "Indeed \"{}\" [s1], yet you said \"and so I hold\" [o1] and I hold otherwise [s1].",
            near.join(" ")
        )
    } else {
        let quote = words[..5.min(words.len())].join(" ");
        format!("\"{quote}\" [s1], and so I hold [s1].")
    };
    Reply::Delay(Duration::from_millis(1200), Box::new(Reply::text(&text)))
}

fn count(b: &mut Browser, selector: &str) -> u64 {
    b.eval(&format!("document.querySelectorAll({selector:?}).length"))
        .unwrap()
        .as_u64()
        .unwrap_or(0)
}

fn text_of(b: &mut Browser, selector: &str) -> String {
    b.eval(&format!(
        "(document.querySelector({selector:?}) || {{textContent: ''}}).textContent"
    ))
    .unwrap()
    .as_str()
    .unwrap_or_default()
    .to_string()
}

/// Whether the panel `selector` is open and on top: the point at the
/// middle of its sheet belongs to it (not clipped, not covered).
fn on_top(b: &mut Browser, selector: &str) -> bool {
    b.eval(&format!(
        "(() => {{ const p = document.querySelector({selector:?}); const s = p && p.querySelector('.inner'); \
           if (!s) return false; const r = s.getBoundingClientRect(); \
           const hit = document.elementFromPoint(r.left + r.width / 2, r.top + Math.min(r.height / 2, 200)); \
           return r.height > 100 && !!hit && p.contains(hit); }})()"
    ))
    .unwrap()
        == Value::Bool(true)
}

/// Whether the element is shown (not `display: none`).
fn shown(b: &mut Browser, selector: &str) -> bool {
    b.eval(&format!(
        "(() => {{ const e = document.querySelector({selector:?}); return !!e && getComputedStyle(e).display !== 'none'; }})()"
    ))
    .unwrap()
        == Value::Bool(true)
}

/// Opens the proof panel the link `link` points at, which is hidden until
/// then; returns the panel's selector.
fn open_proof(b: &mut Browser, link: &str) -> String {
    let panel = b
        .eval(&format!(
            "document.querySelector({link:?}).getAttribute('href')"
        ))
        .unwrap()
        .as_str()
        .unwrap()
        .to_string();
    assert!(!shown(b, &panel), "the proof is hidden until asked for");
    b.eval(&format!("document.querySelector({link:?}).click()"))
        .unwrap();
    b.wait_for(
        &format!("getComputedStyle(document.querySelector('{panel}')).display !== 'none'"),
        Duration::from_secs(10),
    )
    .unwrap();
    panel
}

/// The root `holder` announced for `key`, as `grove roots` shows it.
fn announced_root(observer: &Daemon, key: &str) -> String {
    let roots = observer.json(&["roots"]);
    roots["roots"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["shards"].as_array().unwrap().iter())
        .flat_map(|s| s["books"].as_array().unwrap().iter())
        .find(|b| b["key"] == key)
        .and_then(|b| b["root"].as_str())
        .unwrap_or_else(|| panic!("no root for {key}: {roots}"))
        .to_string()
}

#[test]
fn the_moot_page_follows_a_three_node_moot_live_and_proves_every_quote() {
    let Some(mut b) = browser() else { return };
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let host_env: &[(&'static str, &str)] = &[("GROVE_HTTP__LISTEN", &listen)];
    let (_servers, _a, _bravo, c) =
        crate::moot_net::three_nodes_with(page_reply, false, [&[], &[], host_env]);
    let base = format!("http://127.0.0.1:{port}");

    // The overview: the mesh, the books with their roots, the start form.
    b.navigate(&format!("{base}/")).unwrap();
    let overview = text_of(&mut b, "main");
    assert!(
        overview.contains("moots") && overview.contains("epoch 2"),
        "{overview}"
    );
    assert!(overview.contains("fiction/sea-tales") && overview.contains("essays/field-notes"));
    assert_eq!(count(&mut b, "form.start select"), 2);
    b.screenshot(&shots().join("overview.png"), true).unwrap();

    let turns = 4u64;
    // Started from the overview's form (same origin on loopback); the
    // answer goes on to the moot's page.
    b.events.clear();
    b.eval(&format!(
        "document.getElementById('topic').value = 'the sea'; \
         document.getElementById('turns').value = '{turns}'; \
         document.querySelector('form.start').requestSubmit()"
    ))
    .unwrap();
    b.wait_event("Page.loadEventFired", Duration::from_secs(60))
        .unwrap();
    let path = b.eval("location.pathname").unwrap();
    let id = path
        .as_str()
        .and_then(|p| p.strip_prefix("/moots/"))
        .unwrap_or_else(|| panic!("the form led to {path}: {}", text_of(&mut b, "main")))
        .to_string();
    b.eval("window.__loadedOnce = 'yes'").unwrap();
    let at_load = count(&mut b, "#turns .turn");
    assert!(at_load < turns, "the page opened after the moot ended");
    // Each turn appears without a reload, in speaking order.
    let mut seen = at_load;
    while seen < turns {
        b.wait_for(
            &format!("document.querySelectorAll('#turns .turn').length > {seen}"),
            Duration::from_secs(120),
        )
        .unwrap_or_else(|e| panic!("turn {} never appeared live: {e}", seen + 1));
        seen = count(&mut b, "#turns .turn");
        if seen == 2 {
            b.screenshot(&shots().join("moot-live-running.png"), false)
                .unwrap();
        }
    }
    b.wait_for(
        "document.getElementById('moot-state').dataset.state === 'finished'",
        Duration::from_secs(60),
    )
    .unwrap();
    assert_eq!(
        b.eval("window.__loadedOnce").unwrap(),
        "yes",
        "the page reloaded"
    );
    let order = b
        .eval("Array.from(document.querySelectorAll('#turns .turn')).map(t => t.dataset.index).join(',')")
        .unwrap();
    assert_eq!(order, "0,1,2,3");
    b.screenshot(&shots().join("moot-live.png"), true).unwrap();

    // Badges: a verified, a snapped and an [oN] quote, each with its label.
    for (class, label) in [
        ("verified", "verified"),
        ("snapped", "snapped"),
        ("turn", "[o1]"),
    ] {
        let sel = format!("a.q-{class} .badge");
        assert!(count(&mut b, &sel) >= 1, "no {class} badge");
        let shown_label = text_of(&mut b, &sel);
        assert!(shown_label.contains(label), "{class}: {shown_label}");
    }
    assert_eq!(count(&mut b, "a.q-unverified"), 0);

    // A verified quote opens its proof: the passage, marked, and the root
    // alpha announced.
    let shown_moot = c.json(&["moot", "show", &id]);
    let first = &shown_moot["transcript"]["utterances"][0];
    let s1 = first["retrieved"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["tag"] == "s1")
        .unwrap();
    let panel = open_proof(&mut b, "#t0 a.q-verified");
    assert!(
        on_top(&mut b, &panel),
        "the proof panel is hidden or clipped"
    );
    let passage = text_of(&mut b, &format!("{panel} blockquote.passage"));
    assert_eq!(passage, s1["content"].as_str().unwrap());
    let marked = text_of(&mut b, &format!("{panel} mark"));
    let quote = first["quotes"][0]["text"].as_str().unwrap();
    assert_eq!(marked.to_lowercase(), quote.to_lowercase());
    let root = text_of(&mut b, &format!("{panel} code.root"));
    assert_eq!(root, announced_root(&c, "fiction/sea-tales"));
    let facts = text_of(&mut b, &format!("{panel} dl.facts"));
    assert!(facts.contains(s1["label"].as_str().unwrap()), "{facts}");
    assert!(facts.contains(s1["leaf"].as_str().unwrap()), "{facts}");
    assert!(
        facts.contains("the proof checks against this root"),
        "{facts}"
    );
    assert!(facts.contains("signed by alpha"), "{facts}");
    b.screenshot(&shots().join("proof-panel.png"), false)
        .unwrap();

    // A tag opens the passage it names.
    // Escape closes it (the keyboard's way back to the turn).
    for kind in ["keyDown", "keyUp"] {
        b.call(
            "Input.dispatchKeyEvent",
            serde_json::json!({"type": kind, "key": "Escape", "code": "Escape", "windowsVirtualKeyCode": 27}),
        )
        .unwrap();
    }
    b.wait_for(
        &format!("getComputedStyle(document.querySelector('{panel}')).display === 'none'"),
        Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(b.eval("location.hash").unwrap(), "#t0");
    let tag = b
        .eval("document.querySelector('#t0 a.tag').getAttribute('href')")
        .unwrap()
        .as_str()
        .unwrap()
        .to_string();
    b.eval("document.querySelector('#t0 a.tag').click()")
        .unwrap();
    b.wait_for(
        &format!("getComputedStyle(document.querySelector('{tag}')).display !== 'none'"),
        Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(
        text_of(&mut b, &format!("{tag} blockquote.passage")),
        s1["content"].as_str().unwrap()
    );

    // On a phone-sized screen.
    b.call(
        "Emulation.setDeviceMetricsOverride",
        serde_json::json!({"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": true}),
    )
    .unwrap();
    b.navigate(&format!("{base}/moots/{id}")).unwrap();
    b.screenshot(&shots().join("moot-phone.png"), false)
        .unwrap();
    b.call(
        "Emulation.clearDeviceMetricsOverride",
        serde_json::json!({}),
    )
    .unwrap();

    // Without JavaScript a finished moot reads the same: every turn is in
    // the HTML.
    let html = crate::http::get_text(port, &format!("/moots/{id}"));
    assert_eq!(
        html.matches("<article class=\"turn\"").count(),
        turns as usize
    );

    verify_page(&mut b, &base, &c, &id);
}

/// bravo's opening passages (what its node's opening search returns for
/// the topic), set before the moot starts, for [`opening_reply`].
static BRAVO_OPENING: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Whitespace collapsed, for finding a passage's words in a prompt.
fn spaced(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Replies that quote, in bravo's turns, five words of an opening passage
/// this turn was not shown: words of bravo's book (the host's grading
/// finds them in its pool, so they stay quoted) that no signed turn
/// carries with a proof. Other turns quote passage [s1] as it is.
fn opening_reply(req: &RecordedRequest) -> Reply {
    let contents: Vec<&str> = req.body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_str())
        .collect();
    let prompt = spaced(&contents.join(" "));
    let unshown = BRAVO_OPENING
        .lock()
        .unwrap()
        .iter()
        .find(|p| {
            let head: Vec<&str> = p.split_whitespace().take(6).collect();
            !prompt.contains(&head.join(" "))
        })
        .cloned();
    let bravo = req.first_passage().is_some_and(|words| {
        let line = words.join(" ");
        BRAVO_OPENING
            .lock()
            .unwrap()
            .iter()
            .any(|p| spaced(p).contains(&line))
            || spaced(&crate::support::generated_book(
                "Field Notes",
                "Anon",
                4,
                60,
                4,
            ))
            .contains(&line)
    });
    match unshown.filter(|_| bravo) {
        Some(passage) => {
            let words: Vec<&str> = passage.split_whitespace().take(5).collect();
            Reply::text(&format!(
                "\"{}\" [s1], as my notes hold [s1].",
                words.join(" ")
            ))
        }
        None => crate::moot_net::quoting_reply(req),
    }
}

#[test]
fn a_pass_shows_its_nodes_reason_and_an_unproven_quote_its_own_badge() {
    let Some(mut b) = browser() else { return };
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    // charlie hosts and holds the third book; its policy passes unless a
    // passage scores above a bar none reaches.
    let host_env: &[(&'static str, &str)] = &[
        ("GROVE_HTTP__LISTEN", &listen),
        ("GROVE_SPEAKER__POLICY", "grounded-only"),
        ("GROVE_SPEAKER__MIN_SCORE", "1000000"),
    ];
    let (_servers, _a, bravo, c) =
        crate::moot_net::three_nodes_with(opening_reply, true, [&[], &[], host_env]);
    // bravo's opening, as its node's opening search will find it (the
    // same search on its own store).
    let tree = grove::moot::Tree::new("essays/field-notes", "Field Notes", "Anon");
    let query = grove::moot::speaker::opening_query(Some("the sea"), &tree);
    let mut store = grove::store::Store::new(&bravo.g.state());
    let mut retriever =
        grove::store::retriever::BookRetriever::open(&mut store, "essays/field-notes").unwrap();
    let opening = grove::moot::speaker::retrieve(
        &mut retriever,
        "essays/field-notes",
        &query,
        6,
        &Default::default(),
    )
    .unwrap();
    *BRAVO_OPENING.lock().unwrap() = opening.into_iter().map(|p| p.content).collect();

    let id = crate::moot_net::start_three_book_moot(&c, 3);
    let shown_moot = crate::moot_net::wait_state(&c, &id, "finished");
    b.navigate(&format!("http://127.0.0.1:{port}/moots/{id}"))
        .unwrap();
    assert_eq!(count(&mut b, "#turns .turn"), 3);
    let utterances = shown_moot["transcript"]["utterances"].as_array().unwrap();

    // Turn 3 is charlie's pass: its badge, and its node's reason as the
    // transcript records it; no text and no grounding line.
    let decision = &utterances[2]["decision"];
    assert_eq!(decision["action"], "pass", "{decision}");
    let reason = decision["reason"].as_str().unwrap();
    assert!(
        reason.contains("not above") || reason.contains("no passage"),
        "{reason}"
    );
    let pass = text_of(&mut b, "#t2 p.pass");
    assert_eq!(pass, format!("passed {reason}"), "{pass}");
    assert_eq!(text_of(&mut b, "#t2 .pass .badge"), "passed");
    assert_eq!(text_of(&mut b, "#t2 .node"), "charlie");
    assert_eq!(count(&mut b, "#t2 p.text"), 0);
    assert_eq!(count(&mut b, "#t2 p.meta"), 0);
    assert_eq!(count(&mut b, "#t0 p.pass, #t1 p.pass"), 0);

    // Turn 2 is bravo's: it quoted its book's words from a passage of its
    // opening that no signed turn carries. The host's grading found them
    // (a grounded turn), but nothing proves them here: its own badge, and
    // a panel that says what is missing.
    let quote = utterances[1]["quotes"][0]["text"].as_str().unwrap();
    assert_eq!(
        utterances[1]["quotes"][0]["found"], true,
        "{}",
        utterances[1]
    );
    let carried: Vec<String> = shown_moot["transcript"]["utterances"][1]["retrieved"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| spaced(p["content"].as_str().unwrap()))
        .collect();
    assert!(!carried.iter().any(|p| p.contains(quote)), "{quote}");
    assert_eq!(
        count(&mut b, "#t1 a.q-unverified"),
        1,
        "{}",
        text_of(&mut b, "#t1")
    );
    assert_eq!(text_of(&mut b, "#t1 a.q-unverified .badge"), "unverified");
    assert_eq!(count(&mut b, "a.q-unverified"), 1);
    // Its colour is its own, not a verified quote's.
    let colour = |b: &mut Browser, sel: &str| {
        b.eval(&format!(
            "getComputedStyle(document.querySelector({sel:?})).backgroundColor"
        ))
        .unwrap()
    };
    let unverified_colour = colour(&mut b, "#t1 a.q-unverified .badge");
    assert_ne!(unverified_colour, colour(&mut b, "#t0 a.q-verified .badge"));
    let panel = open_proof(&mut b, "#t1 a.q-unverified");
    let says = text_of(&mut b, &panel);
    assert!(
        says.contains(quote)
            && says.contains("is in none of the passages this book's turns carried with a proof"),
        "{says}"
    );
    assert_eq!(count(&mut b, &format!("{panel} code.root")), 0, "{says}");
    b.screenshot(&shots().join("moot-pass-unverified.png"), true)
        .unwrap();
}

/// The verify page: an intact export passes, a tampered one fails at the
/// turn `grove moot verify` names.
fn verify_page(b: &mut Browser, base: &str, host: &Daemon, id: &str) {
    use grove::wire::moot::TurnPayload;

    let export = host.json(&["moot", "export", id]);
    let dir = tempfile::tempdir().unwrap();
    let intact = dir.path().join("moot-export.json");
    std::fs::write(&intact, serde_json::to_string_pretty(&export).unwrap()).unwrap();

    // A proof step of turn 2 changed, re-signed with the host's key so only
    // the inner checks can catch it.
    let opened = crate::moot_net::Resigner::open(&export, host);
    let mut body = opened.body.clone();
    let mut payload = TurnPayload::decode(body.turns[1].body.as_slice()).unwrap();
    let step = payload.passages[0].proof.first_mut().expect("a proof step");
    step.sibling[0] ^= 1;
    body.turns[1].body = payload.encode_to_vec();
    let tampered_export = opened.sign(&body);
    let tampered = dir.path().join("tampered-export.json");
    std::fs::write(
        &tampered,
        serde_json::to_string_pretty(&tampered_export).unwrap(),
    )
    .unwrap();
    // The command line's verdict, to compare with the page's.
    let (cli_ok, cli_out) = crate::moot_net::verify_offline(&tampered_export);
    assert!(!cli_ok && cli_out.contains("turn 2"), "{cli_out}");
    let cli_turns: Vec<String> = cli_out
        .lines()
        .filter_map(|l| l.strip_prefix("MISMATCH turn ")?.split(':').next())
        .map(str::to_string)
        .collect();
    let (cli_ok, cli_out) = crate::moot_net::verify_offline(&export);
    assert!(cli_ok, "{cli_out}");

    b.navigate(&format!("{base}/verify")).unwrap();
    b.set_file("#file", &intact).unwrap();
    b.wait_for(
        "!!document.querySelector('#verdict [data-ok]')",
        Duration::from_secs(60),
    )
    .unwrap();
    assert_eq!(
        b.eval("document.querySelector('#verdict [data-ok]').dataset.ok")
            .unwrap(),
        "true",
        "{}",
        text_of(b, "#verdict")
    );
    let verdict = text_of(b, "#verdict");
    assert!(verdict.contains("verifies"), "{verdict}");
    assert!(
        verdict.contains(&format!("{} signed turns", 4)),
        "{verdict}"
    );
    b.screenshot(&shots().join("verify-ok.png"), false).unwrap();

    b.navigate(&format!("{base}/verify")).unwrap();
    b.set_file("#file", &tampered).unwrap();
    b.wait_for(
        "!!document.querySelector('#verdict [data-ok]')",
        Duration::from_secs(60),
    )
    .unwrap();
    assert_eq!(
        b.eval("document.querySelector('#verdict [data-ok]').dataset.ok")
            .unwrap(),
        "false"
    );
    let failed: Vec<String> = b
        .eval("Array.from(document.querySelectorAll('#verdict li[data-turn]')).map(l => l.dataset.turn)")
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    // The first turn that fails is the tampered one (the chain then breaks
    // after it), and the page names the same turns as the command line.
    assert_eq!(
        failed.first().map(String::as_str),
        Some("2"),
        "{}",
        text_of(b, "#verdict")
    );
    assert_eq!(failed, cli_turns, "{cli_out}");
    let item = text_of(b, "#verdict li[data-turn='2']");
    assert!(
        item.contains("Turn 2") && item.contains("signature"),
        "{item}"
    );
    b.screenshot(&shots().join("verify-tampered.png"), false)
        .unwrap();
}

#[test]
fn the_start_form_follows_the_listeners_write_rules() {
    // Loopback: a cross-origin start is refused; the same origin reaches
    // the handler (which refuses the empty form on its own terms).
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let d = Daemon::start_with("alpha", &[("GROVE_HTTP__LISTEN", &listen)]);
    // A book whose title is markup, shown escaped on the overview.
    let title = "<script>alert(1)</script> & \"Co\"";
    let text = crate::support::generated_book(title, "Anon", 7, 30, 7);
    let file = d.g.write("markup.txt", text.as_bytes());
    d.ok(&[
        "book",
        "add",
        file.to_str().unwrap(),
        "--key",
        "fiction/markup",
    ]);
    d.ok(&["mesh", "init", "--name", "<b>mesh</b>"]);
    crate::cluster::eventually("the overview to list the book", || {
        crate::http::get_text(port, "/").contains("fiction/markup")
    });
    let html = crate::http::get_text(port, "/");
    assert!(
        !html.contains("<script>alert") && !html.contains("<b>mesh"),
        "{html}"
    );
    assert!(
        html.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;Co&quot;"),
        "{html}"
    );
    assert!(html.contains("&lt;b&gt;mesh&lt;/b&gt;"), "{html}");
    let cross = crate::http::request(port, "POST", "/moots", &[("Origin", "http://evil.example")]);
    assert_eq!(cross.status, 403, "{}", cross.body);
    let own = format!("http://127.0.0.1:{port}");
    let same = crate::http::request(port, "POST", "/moots", &[("Origin", &own)]);
    assert_eq!(same.status, 400, "{}", same.body);
    let page = crate::http::request(port, "GET", "/", &[]);
    assert_eq!(page.status, 200);
    let csp = page.header("content-security-policy").unwrap_or_default();
    assert!(
        csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );

    // Any other address without the token: the page with the form and the
    // start request are both refused; with it, both pass the rules.
    let port = free_port();
    let listen = format!("0.0.0.0:{port}");
    let d = Daemon::start_with("bravo", &[("GROVE_HTTP__LISTEN", &listen)]);
    let token = std::fs::read_to_string(d.g.state().join("http.token"))
        .unwrap()
        .trim()
        .to_string();
    for (method, path) in [
        ("GET", "/"),
        ("POST", "/moots"),
        ("GET", "/verify"),
        ("POST", "/verify"),
    ] {
        let bare = crate::http::request(port, method, path, &[]);
        assert_eq!(bare.status, 401, "{method} {path}: {}", bare.body);
    }
    let bearer = format!("Bearer {token}");
    let page = crate::http::request(port, "GET", "/", &[("Authorization", &bearer)]);
    assert_eq!(page.status, 200, "{}", page.body);
    let start = crate::http::request(port, "POST", "/moots", &[("Authorization", &bearer)]);
    assert_eq!(start.status, 400, "{}", start.body);
}

/// The ask page: a question typed into `/asks` on a one-member mesh is
/// answered (a scripted model copying its passages), the answer's page
/// shows each claim with its verdict and slice, the record's own check and
/// the mesh anchor's, and a pointer opens its passage's proof panel (the
/// proof and the signed announcement checked); the record it serves
/// verifies with `grove ask verify --expect-mesh`.
#[test]
fn the_ask_page_answers_and_proves_every_passage() {
    let Some(mut b) = browser() else { return };
    let server = crate::ask::copying_server();
    let url = server.url();
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let d = Daemon::start_with(
        "alpha",
        &[
            ("GROVE_HTTP__LISTEN", &listen),
            ("GROVE_MODEL__BACKEND", "openai"),
            ("GROVE_MODEL__URL", &url),
        ],
    );
    for book in [
        "corpus/moby-dick-2701-excerpt.txt",
        "corpus/pride-and-prejudice-1342-excerpt.txt",
    ] {
        d.ok(&[
            "book",
            "add",
            crate::support::data_file(book).to_str().unwrap(),
        ]);
    }
    d.ok(&["mesh", "init", "--name", "readers"]);
    let base = format!("http://127.0.0.1:{port}");
    b.navigate(&format!("{base}/asks")).unwrap();
    assert_eq!(count(&mut b, "form.start select#scope"), 1);
    let question = "Who is Ishmael?";
    b.eval(&format!(
        "document.querySelector('#question').value = {question:?}; \
         document.querySelector('#scope').value = 'mesh'; \
         document.querySelector('form.start').submit()"
    ))
    .unwrap();
    b.wait_for(
        "/^\\/asks\\/[0-9a-f]{64}$/.test(location.pathname) && !!document.querySelector('ol.claims')",
        Duration::from_secs(90),
    )
    .unwrap();
    let path = b
        .eval("location.pathname")
        .unwrap()
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(text_of(&mut b, "h1"), question);
    let claims = count(&mut b, "ol.claims > li");
    assert!(claims >= 1, "no claims shown");
    let main = text_of(&mut b, "main");
    assert!(main.contains("lines held up"), "{main}");
    assert!(
        main.contains("✓ every passage's proof, the verification and every stage recomputed"),
        "{main}"
    );
    assert!(
        main.contains("✓ every passage is of a book its holder announced in mesh"),
        "{main}"
    );
    b.screenshot(&shots().join("ask-answer.png"), true).unwrap();
    let panel = open_proof(&mut b, "ol.claims a.tag");
    assert!(
        on_top(&mut b, &panel),
        "the proof panel is hidden or clipped"
    );
    let facts = text_of(&mut b, &format!("{panel} dl.facts"));
    assert!(
        facts.contains("the proof checks against this root"),
        "{facts}"
    );
    assert!(facts.contains("signed by alpha"), "{facts}");
    assert!(facts.contains("Held by"), "{facts}");
    assert!(!text_of(&mut b, &format!("{panel} mark")).is_empty());
    b.screenshot(&shots().join("ask-panel.png"), false).unwrap();

    // The record it serves verifies offline, pinned to the mesh.
    let record = crate::http::get_text(port, &format!("{path}/record"));
    let file = d.g.write("answer.json", record.as_bytes());
    let mesh_id = d.status()["mesh_id"].as_str().unwrap().to_string();
    let verdict = d.json(&[
        "ask",
        "verify",
        file.to_str().unwrap(),
        "--expect-mesh",
        &mesh_id,
    ]);
    assert_eq!(verdict["valid"], true, "{verdict}");
    // The list shows it; a malformed root is refused by name.
    assert!(crate::http::get_text(port, "/asks").contains(question));
    let bad = crate::http::request(port, "GET", "/asks/nothex", &[]);
    assert_eq!(bad.status, 400, "{}", bad.body);
}
