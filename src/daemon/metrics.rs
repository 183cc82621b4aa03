//! `/metrics`: the node's one set of counters ([`Stats`], which `grove node
//! stats` shows as dotted names) rendered as OpenMetrics families, with its
//! latency histograms and gauges read at scrape time. Names follow the
//! OpenMetrics rules: a `grove_` prefix, `_total` on counters, units as
//! suffixes, no colons (docs/operator-guide.md lists them).

use std::collections::BTreeMap;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::stats::Stats;

/// The content type of an OpenMetrics text exposition (what Prometheus
/// asks for first).
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The content type of the older Prometheus text format (0.0.4), for
/// clients that do not ask for OpenMetrics (curl, `promtool check
/// metrics`).
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The Prometheus text format of an OpenMetrics exposition: a counter's
/// HELP and TYPE name its `_total` samples, and the `# UNIT` and `# EOF`
/// lines (which that format lacks) go.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|tag| {
            let rest = line.strip_prefix(tag)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{tag}{name}_total {tail}"))
        });
        match renamed {
            Some(l) => out.push_str(&l),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// How a dotted counter name becomes a family and labels: the pattern's
/// literal segments must match, each `{label}` segment is that label's
/// value. The first rule that matches wins.
struct Rule {
    pattern: &'static str,
    family: &'static str,
    help: &'static str,
    unit: Option<Unit>,
    /// Counts per unit: a counter kept in nanoseconds is shown in seconds
    /// (1e9 per unit); 1 shows the count as it is.
    per_unit: u64,
}

const fn rule(pattern: &'static str, family: &'static str, help: &'static str) -> Rule {
    Rule {
        pattern,
        family,
        help,
        unit: None,
        per_unit: 1,
    }
}

/// A counter kept in nanoseconds, shown as the family's seconds.
const fn seconds(pattern: &'static str, family: &'static str, help: &'static str) -> Rule {
    Rule {
        pattern,
        family,
        help,
        unit: Some(Unit::Seconds),
        per_unit: 1_000_000_000,
    }
}

/// Every counter of the vocabulary (`stats.bump`, `stats.set`), once.
const RULES: &[Rule] = &[
    rule(
        "gossip.published",
        "grove_gossip_published",
        "Gossip messages this node published.",
    ),
    rule(
        "gossip.republished",
        "grove_gossip_republished",
        "Gossip messages published again (the periodic re-send).",
    ),
    rule(
        "gossip.dropped.{reason}",
        "grove_gossip_dropped",
        "Gossip messages dropped, by reason.",
    ),
    rule(
        "gossip.{outcome}",
        "grove_gossip_messages",
        "Gossip messages received, by verdict (accepted, rejected, ignored).",
    ),
    rule(
        "announcements.dropped.{reason}",
        "grove_announcements_dropped",
        "Root announcements dropped, by reason.",
    ),
    rule(
        "announcements.{outcome}",
        "grove_announcements",
        "Root announcements accepted or sent.",
    ),
    rule(
        "requests.refused.{protocol}.{reason}",
        "grove_requests_refused",
        "Requests refused by the node's limits, by protocol and reason.",
    ),
    rule(
        "requests.{outcome}.{protocol}",
        "grove_requests",
        "Requests answered, by protocol and outcome (served, refused).",
    ),
    rule(
        "control.requests.{listener}.{endpoint}",
        "grove_control_requests",
        "Control API requests, by listener (socket, http) and endpoint.",
    ),
    rule(
        "moot.turns.{outcome}",
        "grove_moot_turns",
        "Hosted moot turns, by outcome (landed, failed).",
    ),
    rule(
        "moot.grounding.{verdict}",
        "grove_moot_grounding",
        "Hosted moot turns that landed, by grounding verdict (grounded, ungrounded, passed).",
    ),
    rule(
        "moot.quotes.{count}",
        "grove_moot_quotes",
        "Quotes in the hosted moots' landed turns (checked, found in the passages): found/checked is the quote rate.",
    ),
    rule(
        "ingest.books.{status}",
        "grove_ingest_books",
        "Books stored through the control API, by status (added, new-version, unchanged).",
    ),
    Rule {
        pattern: "ingest.bytes",
        family: "grove_ingest",
        help: "Bytes of the books stored through the control API.",
        unit: Some(Unit::Bytes),
        per_unit: 1,
    },
    rule(
        "sync.{outcome}",
        "grove_syncs",
        "Catch-up syncs, by outcome (applied, refused, failed).",
    ),
    rule(
        "mesh.commits.applied",
        "grove_mesh_commits_applied",
        "Mesh commits this node applied (its genesis, a welcome, roster changes).",
    ),
    rule(
        "epochs.seen",
        "grove_epochs_seen",
        "Mesh epochs this node moved to.",
    ),
    rule(
        "dropped.{reason}",
        "grove_network_dropped",
        "Connections and requests the network dropped, by reason.",
    ),
    rule(
        "admission.{action}.{reason}",
        "grove_admission_strangers",
        "Strangers' connections refused or closed by admission control.",
    ),
    rule(
        "relay.client.circuits.{direction}",
        "grove_relay_circuits",
        "Relayed circuits this node opened or accepted.",
    ),
    rule(
        "relay.client.reservations.{event}",
        "grove_relay_reservations",
        "Relay reservations asked for or lost.",
    ),
    rule(
        "holepunch.{outcome}.{transport}",
        "grove_holepunch",
        "Hole punches (DCUtR dials) to members reached through a relay, by outcome (attempts, successes, failures) and transport (tcp, quic).",
    ),
    Rule {
        pattern: "relay.bytes.{direction}",
        family: "grove_relay",
        help: "Bytes relayed for others.",
        unit: Some(Unit::Bytes),
        per_unit: 1,
    },
    rule(
        "model.completions.{outcome}",
        "grove_model_completions",
        "Completions of this node's model (its turns and summaries), by outcome (answered, failed).",
    ),
    seconds(
        "model.completion.ns",
        "grove_model",
        "Seconds this node's model spent on completions, answered or failed, as the node timed them (every backend).",
    ),
    rule(
        "model.prompt.tokens",
        "grove_model_prompt_tokens",
        "Prompt tokens this node's model read, as its backend counted them.",
    ),
    rule(
        "model.generated.tokens",
        "grove_model_generated_tokens",
        "Tokens this node's model generated, as its backend counted them.",
    ),
    seconds(
        "model.prompt.ns",
        "grove_model_prompt",
        "Seconds reading prompts, where the backend times it apart (embedded; llama.cpp's server): prompt tokens per second follow.",
    ),
    seconds(
        "model.generation.ns",
        "grove_model_generation",
        "Seconds generating, where the backend times it apart (embedded; llama.cpp's server): generated tokens per second follow.",
    ),
];

/// Counters no rule names (a new name without its rule) still show.
static OTHER: Rule = rule(
    "{name}",
    "grove_other_events",
    "Counters without their own family, by dotted name.",
);

type Labels = Vec<(&'static str, String)>;

/// The labels of `name` under `pattern`, if it matches.
fn labels_of(pattern: &'static str, name: &str) -> Option<Labels> {
    let (mut p, mut n) = (pattern.split('.'), name.split('.'));
    let mut labels = Vec::new();
    loop {
        match (p.next(), n.next()) {
            (None, None) => return Some(labels),
            (Some(seg), Some(value)) => match seg.strip_prefix('{') {
                Some(label) => labels.push((label.trim_end_matches('}'), value.to_string())),
                None if seg == value => {}
                None => return None,
            },
            _ => return None,
        }
    }
}

/// The counters as families: each rule's samples, label-less ones at 0
/// before their first count.
fn families(snapshot: BTreeMap<String, u64>) -> Vec<(&'static Rule, Vec<(Labels, u64)>)> {
    let mut out: Vec<(&'static Rule, Vec<(Labels, u64)>)> = RULES
        .iter()
        .map(|r| {
            let zero = if r.pattern.contains('{') {
                Vec::new()
            } else {
                vec![(Vec::new(), 0)]
            };
            (r, zero)
        })
        .collect();
    let mut other = Vec::new();
    for (name, value) in snapshot {
        let found = RULES
            .iter()
            .enumerate()
            .find_map(|(i, r)| labels_of(r.pattern, &name).map(|l| (i, l)));
        match found {
            Some((i, labels)) if labels.is_empty() => out[i].1 = vec![(labels, value)],
            Some((i, labels)) => out[i].1.push((labels, value)),
            None => other.push((vec![("name", name)], value)),
        }
    }
    if !other.is_empty() {
        out.push((&OTHER, other));
    }
    out
}

/// One counter's sample: the count, or with `per_unit` > 1 the count in
/// its unit (nanoseconds as seconds).
fn encode_counter(
    value: u64,
    per_unit: u64,
    encoder: MetricEncoder<'_>,
) -> Result<(), std::fmt::Error> {
    if per_unit == 1 {
        ConstCounter::new(value).encode(encoder)
    } else {
        ConstCounter::new(value as f64 / per_unit as f64).encode(encoder)
    }
}

/// Renders [`Stats`]' counters at each scrape: the same numbers `grove
/// node stats` shows.
#[derive(Debug)]
struct Counters(Arc<Stats>);

impl Collector for Counters {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for (rule, samples) in families(self.0.snapshot()) {
            let mut family = encoder.encode_descriptor(
                rule.family,
                rule.help,
                rule.unit.as_ref(),
                MetricType::Counter,
            )?;
            match samples.as_slice() {
                // A label-less counter is written bare (no `{}`).
                [(labels, value)] if labels.is_empty() => {
                    encode_counter(*value, rule.per_unit, family)?;
                }
                _ => {
                    for (labels, value) in samples {
                        encode_counter(value, rule.per_unit, family.encode_family(&labels)?)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// What a scrape reads from the node's parts for the gauges.
#[derive(Debug, Clone, Copy, Default)]
pub struct Readings {
    pub members: u64,
    pub members_online: u64,
    pub epoch: u64,
    pub open_proposals: u64,
    pub books: u64,
    pub chunks: u64,
    pub damaged_databases: u64,
}

/// The registry `/metrics` encodes: libp2p's own families (`libp2p_`,
/// registered by the network) and grove's. (Its `register` ends each help
/// text with a period; the counters' own descriptors carry theirs.)
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    members: Gauge,
    members_online: Gauge,
    epoch: Gauge,
    open_proposals: Gauge,
    books: Gauge,
    chunks: Gauge,
    damaged_databases: Gauge,
}

impl Metrics {
    /// Grove's families added to `registry` (which may hold others').
    pub fn new(stats: Arc<Stats>, mut registry: Registry) -> Metrics {
        let mut gauge = |name: &str, help: &str| {
            let g = Gauge::default();
            registry.register(name, help, g.clone());
            g
        };
        let members = gauge("grove_mesh_members", "Members in the mesh's roster");
        let members_online = gauge(
            "grove_mesh_members_online",
            "Members connected to this node, this node included",
        );
        let epoch = gauge("grove_mesh_epoch", "The mesh epoch this node is at");
        let open_proposals = gauge(
            "grove_mesh_open_proposals",
            "Membership proposals not yet committed",
        );
        let books = gauge("grove_books", "Books stored on this node");
        let chunks = gauge(
            "grove_book_chunks",
            "Chunks of the books stored on this node",
        );
        let damaged_databases = gauge(
            "grove_databases_damaged",
            "Databases the latest integrity check found damaged (node.integrity_check_secs)",
        );
        registry.register_with_unit(
            "grove_search_duration",
            "Search latency, by scope (local, mesh, peer)",
            Unit::Seconds,
            stats.search_seconds.clone(),
        );
        registry.register_with_unit(
            "grove_ask_duration",
            "Asks from the request to the verified answer, by scope (local, mesh)",
            Unit::Seconds,
            stats.ask_seconds.clone(),
        );
        registry.register_with_unit(
            "grove_moot_turn_duration",
            "Hosted moot turns from the ask to the checked answer, by speaker (local, remote)",
            Unit::Seconds,
            stats.turn_seconds.clone(),
        );
        registry.register_with_unit(
            "grove_ingest_duration",
            "Books stored through the control API, from the request to the commit, by status",
            Unit::Seconds,
            stats.ingest_seconds.clone(),
        );
        registry.register_collector(Box::new(Counters(stats)));
        Metrics {
            registry,
            members,
            members_online,
            epoch,
            open_proposals,
            books,
            chunks,
            damaged_databases,
        }
    }

    /// The exposition, with the gauges set from `now`.
    pub fn render(&self, now: Readings) -> String {
        let set = |g: &Gauge, v: u64| {
            g.set(i64::try_from(v).unwrap_or(i64::MAX));
        };
        set(&self.members, now.members);
        set(&self.members_online, now.members_online);
        set(&self.epoch, now.epoch);
        set(&self.open_proposals, now.open_proposals);
        set(&self.books, now.books);
        set(&self.chunks, now.chunks);
        set(&self.damaged_databases, now.damaged_databases);
        let mut out = String::new();
        // Writing to a String does not fail; an encoder error would be a
        // bug in a family name, and the scrape shows what came before it.
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!(error = %e, "encoding /metrics");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_names_become_families_with_labels() {
        let stats = Arc::new(Stats::default());
        stats.bump("gossip.accepted");
        stats.bump("gossip.dropped.duplicate");
        stats.add("requests.served.search", 3);
        stats.bump("requests.refused.turn.turn-quota");
        stats.set("relay.bytes.sent", 10);
        stats.bump("something.new");
        stats.model_completion(
            std::time::Duration::from_millis(1500),
            true,
            Some(&crate::model::Usage {
                prompt_tokens: 40,
                generated_tokens: 8,
                phases: Some((
                    std::time::Duration::from_millis(250),
                    std::time::Duration::from_millis(1000),
                )),
            }),
        );
        stats.model_completion(std::time::Duration::from_millis(500), false, None);
        crate::daemon::stats::observe(
            &stats.search_seconds,
            "scope",
            "local",
            std::time::Duration::from_millis(3),
        );
        let text = Metrics::new(stats, Registry::default()).render(Readings {
            epoch: 2,
            ..Readings::default()
        });
        for line in [
            "grove_gossip_messages_total{outcome=\"accepted\"} 1",
            "grove_gossip_dropped_total{reason=\"duplicate\"} 1",
            "grove_requests_total{outcome=\"served\",protocol=\"search\"} 3",
            "grove_requests_refused_total{protocol=\"turn\",reason=\"turn-quota\"} 1",
            "grove_relay_bytes_total{direction=\"sent\"} 10",
            "grove_other_events_total{name=\"something.new\"} 1",
            "grove_epochs_seen_total 0",
            "grove_model_completions_total{outcome=\"answered\"} 1",
            "grove_model_completions_total{outcome=\"failed\"} 1",
            "# UNIT grove_model_seconds seconds",
            "grove_model_seconds_total 2.0",
            "grove_model_prompt_tokens_total 40",
            "grove_model_generated_tokens_total 8",
            "grove_model_prompt_seconds_total 0.25",
            "grove_model_generation_seconds_total 1.0",
            "grove_mesh_epoch 2",
            "# TYPE grove_search_duration_seconds histogram",
            "grove_search_duration_seconds_bucket{le=\"0.004\",scope=\"local\"} 1",
            "grove_search_duration_seconds_count{scope=\"local\"} 1",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
        let plain = to_prometheus_text(&text);
        assert!(plain.contains("# TYPE grove_gossip_messages_total counter\n"));
        assert!(plain.contains("# HELP grove_relay_bytes_total Bytes relayed"));
        assert!(plain.contains("# TYPE grove_mesh_epoch gauge\n"));
        assert!(!plain.contains("# EOF") && !plain.contains("# UNIT"));
    }

    #[test]
    fn a_pattern_matches_whole_segments_only() {
        assert!(labels_of("gossip.{outcome}", "gossip.dropped.x").is_none());
        assert!(labels_of("epochs.seen", "epochs.seen.x").is_none());
        assert_eq!(
            labels_of("sync.{outcome}", "sync.applied"),
            Some(vec![("outcome", "applied".to_string())])
        );
    }
}
