//! Reads the config layers strictly: a TOML file, then `GROVE_*` variables,
//! merged into one TOML table and deserialized without coercion.
//!
//! Each key's kind comes from the defaults' own shape, so the file's values
//! are checked against it (no float for a whole number, no number or string
//! for a boolean, no `nan` or `inf`, no dates) and the environment's text is
//! read as that kind. Every refusal names its key and where it was set.

use std::collections::HashMap;

use super::{ConfigError, Settings, shown};

/// What a key holds, read from its default value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    /// A whole number of 0 or more (no key takes a negative one).
    Whole,
    Float,
    Text,
    /// Text that may be unset (`Option<String>`, `Option<PathBuf>`): every
    /// key whose default is none holds text.
    OptionalText,
    /// A list of text.
    List,
    Section,
}

impl Kind {
    fn of(default: &serde_json::Value) -> Kind {
        use serde_json::Value as J;
        match default {
            J::Bool(_) => Kind::Bool,
            J::Number(n) if n.is_f64() => Kind::Float,
            J::Number(_) => Kind::Whole,
            J::String(_) => Kind::Text,
            J::Null => Kind::OptionalText,
            J::Array(_) => Kind::List,
            J::Object(_) => Kind::Section,
        }
    }

    fn wanted(self) -> &'static str {
        match self {
            Kind::Bool => "true or false",
            Kind::Whole => "a whole number",
            Kind::Float => "a number",
            Kind::Text | Kind::OptionalText => "text (a quoted string)",
            Kind::List => "a list of strings",
            Kind::Section => "a section of keys",
        }
    }
}

/// Every key, dotted, with its kind.
fn kinds() -> HashMap<String, Kind> {
    fn walk(prefix: &str, v: &serde_json::Value, out: &mut HashMap<String, Kind>) {
        if let serde_json::Value::Object(map) = v {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(key.clone(), Kind::of(v));
                walk(&key, v, out);
            }
        }
    }
    let mut out = HashMap::new();
    walk(
        "",
        &serde_json::to_value(Settings::default()).unwrap_or_default(),
        &mut out,
    );
    out
}

/// Where each key was set: a variable's name for those from the
/// environment, else the file.
struct Origins {
    file: String,
    vars: HashMap<String, String>,
}

impl Origins {
    fn of(&self, key: &str) -> String {
        self.vars
            .get(key)
            .cloned()
            .unwrap_or_else(|| self.file.clone())
    }
}

/// Settings from a file's text (`None`: no file) and the environment's
/// variables, read strictly; `origin` names the file in errors. Values are
/// not range-checked here ([`Settings::validate`] does that).
pub(super) fn read(
    file: Option<(&str, &str)>,
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<Settings, ConfigError> {
    let kinds = kinds();
    let (mut table, file_origin) = match file {
        Some((text, origin)) => (parse_file(text, origin)?, origin.to_string()),
        None => (toml::Table::new(), "the environment".to_string()),
    };
    let mut origins = Origins {
        file: file_origin,
        vars: HashMap::new(),
    };
    for (var, text) in vars {
        let Some(rest) = var.strip_prefix("GROVE_") else {
            continue;
        };
        let key = rest.to_ascii_lowercase().replace("__", ".");
        let Some(&kind) = kinds.get(&key) else {
            return Err(ConfigError::UnknownVariable { var, key });
        };
        if let Some(other) = origins.vars.get(&key) {
            return Err(ConfigError::Load(format!(
                "{other} and {var} both set `{key}`; keep one"
            )));
        }
        let value = from_text(kind, &text).map_err(|reason| ConfigError::Value {
            key: key.clone(),
            origin: var.clone(),
            reason,
        })?;
        set(&mut table, &key, value);
        origins.vars.insert(key, var);
    }
    check_kinds(&table, "", &kinds, &origins)?;
    let kept = table.clone();
    serde_path_to_error::deserialize(toml::Value::Table(table))
        .map_err(|e| deserialize_error(e, &kept, &origins))
}

/// The file's text as a table; a syntax error gives its line and column.
fn parse_file(text: &str, origin: &str) -> Result<toml::Table, ConfigError> {
    text.parse::<toml::Table>().map_err(|e| {
        // A span off a character boundary (none is expected) gives no position.
        let at = match e.span().and_then(|span| text.get(..span.start)) {
            Some(before) => {
                let line = before.matches('\n').count() + 1;
                let column = before[before.rfind('\n').map_or(0, |i| i + 1)..]
                    .chars()
                    .count()
                    + 1;
                format!(" at line {line}, column {column}")
            }
            None => String::new(),
        };
        ConfigError::Load(format!(
            "{origin}: not valid TOML{at}: {}",
            e.message().trim()
        ))
    })
}

/// A variable's text read as `kind`. `None`: the key is unset (an empty
/// variable for a key that may be unset).
fn from_text(kind: Kind, text: &str) -> Result<Option<toml::Value>, String> {
    let not = |what: &str| format!("`{}` is not {what}", shown(text));
    Ok(Some(match kind {
        Kind::Bool => match text {
            "true" => toml::Value::Boolean(true),
            "false" => toml::Value::Boolean(false),
            _ => return Err(not("true or false")),
        },
        Kind::Whole => toml::Value::Integer(text.parse().map_err(|_| not("a whole number"))?),
        Kind::Float => toml::Value::Float(text.parse().map_err(|_| not("a number"))?),
        Kind::Text => toml::Value::String(text.to_string()),
        Kind::OptionalText if text.is_empty() => return Ok(None),
        Kind::OptionalText => toml::Value::String(text.to_string()),
        Kind::List if text.trim_start().starts_with('[') => match text.parse::<toml::Value>() {
            Ok(list @ toml::Value::Array(_)) => list,
            _ => return Err(not("a TOML list of strings (`[\"a\", \"b\"]`)")),
        },
        Kind::List if text.trim().is_empty() => toml::Value::Array(Vec::new()),
        Kind::List => {
            let items: Vec<&str> = text.split(',').map(str::trim).collect();
            if items.iter().any(|i| i.is_empty()) {
                return Err(format!(
                    "`{}` has an empty item (items are separated by commas)",
                    shown(text)
                ));
            }
            toml::Value::Array(
                items
                    .into_iter()
                    .map(|i| toml::Value::String(i.to_string()))
                    .collect(),
            )
        }
        Kind::Section => {
            return Err("is a section: set its keys (GROVE_SECTION__KEY)".to_string());
        }
    }))
}

/// Sets (or, with `None`, removes) the dotted `key` in `table`.
fn set(table: &mut toml::Table, key: &str, value: Option<toml::Value>) {
    let mut parts: Vec<&str> = key.split('.').collect();
    let last = parts.pop().unwrap_or_default();
    let mut here = table;
    for part in parts {
        let entry = here
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if !entry.is_table() {
            *entry = toml::Value::Table(toml::Table::new());
        }
        let toml::Value::Table(next) = entry else {
            return;
        };
        here = next;
    }
    match value {
        Some(value) => {
            here.insert(last.to_string(), value);
        }
        None => {
            here.remove(last);
        }
    }
}

/// Refuses unknown keys and values of the wrong kind, by key.
fn check_kinds(
    table: &toml::Table,
    prefix: &str,
    kinds: &HashMap<String, Kind>,
    origins: &Origins,
) -> Result<(), ConfigError> {
    for (name, value) in table {
        let key = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        let Some(&kind) = kinds.get(&key) else {
            return Err(ConfigError::Load(format!(
                "{}: unknown key `{}` (docs/operator-guide.md lists every key)",
                origins.of(&key),
                shown(&key)
            )));
        };
        let refused = |reason: String| ConfigError::Value {
            key: key.clone(),
            origin: origins.of(&key),
            reason,
        };
        match (kind, value) {
            (Kind::Section, toml::Value::Table(inner)) => {
                check_kinds(inner, &key, kinds, origins)?;
            }
            (_, toml::Value::Float(f)) if !f.is_finite() => {
                return Err(refused(format!(
                    "`{f}` is not a finite number (expected {})",
                    kind.wanted()
                )));
            }
            (Kind::Whole, toml::Value::Integer(n)) if *n < 0 => {
                return Err(refused(format!("`{n}` is negative")));
            }
            (Kind::List, toml::Value::Array(items)) => {
                if let Some(item) = items.iter().find(|i| !i.is_str()) {
                    return Err(refused(format!(
                        "every item must be a quoted string, not {}",
                        described(item)
                    )));
                }
            }
            (Kind::Bool, toml::Value::Boolean(_))
            | (Kind::Whole, toml::Value::Integer(_))
            | (Kind::Float, toml::Value::Float(_) | toml::Value::Integer(_))
            | (Kind::Text | Kind::OptionalText, toml::Value::String(_)) => {}
            (kind, other) => {
                return Err(refused(format!(
                    "expected {}, not {}",
                    kind.wanted(),
                    described(other)
                )));
            }
        }
    }
    Ok(())
}

/// A wrong value as an error shows it: its kind and (shortened) text.
fn described(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => format!("the string \"{}\"", shown(s)),
        toml::Value::Integer(n) => format!("the whole number {n}"),
        toml::Value::Float(f) => format!("the number {f:?}"),
        toml::Value::Boolean(b) => format!("the boolean {b}"),
        toml::Value::Datetime(d) => format!("the date {d}"),
        toml::Value::Array(_) => "a list".to_string(),
        toml::Value::Table(_) => "a section".to_string(),
    }
}

/// A deserialization error (a number too large for its key, an unknown
/// choice) by key, with the value shortened.
fn deserialize_error(
    e: serde_path_to_error::Error<toml::de::Error>,
    table: &toml::Table,
    origins: &Origins,
) -> ConfigError {
    let key: Vec<String> = e
        .path()
        .iter()
        .filter_map(|s| match s {
            serde_path_to_error::Segment::Map { key } => Some(key.clone()),
            _ => None,
        })
        .collect();
    let key = key.join(".");
    let mut reason = e.inner().message().trim().to_string();
    // The bad value may be long: show it shortened.
    let mut value = Some(table);
    let mut leaf = None;
    for part in key.split('.') {
        match value.and_then(|t| t.get(part)) {
            Some(toml::Value::Table(t)) => value = Some(t),
            Some(other) => {
                leaf = Some(other);
                value = None;
            }
            None => value = None,
        }
    }
    if let Some(toml::Value::String(s)) = leaf
        && s.chars().count() > 80
    {
        reason = reason
            .replace(&format!("{s:?}"), &format!("\"{}\"", shown(s)))
            .replace(s.as_str(), &shown(s));
    }
    for (rust, plain) in [
        ("expected u8", "expected a whole number up to 255"),
        ("expected u16", "expected a whole number up to 65535"),
        ("expected u32", "expected a whole number up to 4294967295"),
        ("expected u64", "expected a whole number"),
        ("expected usize", "expected a whole number"),
    ] {
        reason = reason.replace(rust, plain);
    }
    if key.is_empty() {
        return ConfigError::Load(format!("{}: {reason}", origins.file));
    }
    ConfigError::Value {
        origin: origins.of(&key),
        key,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_key_reads_its_default_back_from_the_environment() {
        let defaults = serde_json::to_value(Settings::default()).unwrap();
        for (key, kind) in kinds() {
            let mut value = &defaults;
            for part in key.split('.') {
                value = &value[part];
            }
            let text = match (kind, value) {
                (Kind::Section, _) => continue,
                (Kind::List, serde_json::Value::Array(items)) => items
                    .iter()
                    .map(|i| i.as_str().unwrap().to_string())
                    .collect::<Vec<_>>()
                    .join(","),
                (_, serde_json::Value::String(s)) => s.clone(),
                (_, serde_json::Value::Null) => String::new(),
                (_, other) => other.to_string(),
            };
            let var = format!("GROVE_{}", key.to_ascii_uppercase().replace('.', "__"));
            let read =
                read(None, vars(&[(&var, &text)])).unwrap_or_else(|e| panic!("{var}={text}: {e}"));
            assert_eq!(read, Settings::default(), "{var}={text}");
        }
    }

    #[test]
    fn no_coercion_between_kinds() {
        for (text, key) in [
            (
                "[net]\nrequest_timeout_secs = 1e30\n",
                "net.request_timeout_secs",
            ),
            ("[net]\nidle_timeout_secs = inf\n", "net.idle_timeout_secs"),
            ("[moot]\nk = nan\n", "moot.k"),
            ("[moot]\ntemperature = nan\n", "moot.temperature"),
            ("[model]\nguided = 1\n", "model.guided"),
            ("[model]\nthreads = true\n", "model.threads"),
            ("[fetch]\nmax_redirects = 0.5\n", "fetch.max_redirects"),
            ("[fetch]\nmax_redirects = -1\n", "fetch.max_redirects"),
            ("[node]\nname = 1979-05-27\n", "node.name"),
            (
                "[net]\nmax_connections = 5000000000\n",
                "net.max_connections",
            ),
            ("[net]\nlisten = [1]\n", "net.listen"),
        ] {
            let err = read(Some((text, "f.toml")), vec![])
                .unwrap_err()
                .to_string();
            assert!(err.contains(&format!("`{key}`")), "{text}: {err}");
        }
        let err = read(None, vars(&[("GROVE_MODEL__GUIDED", "1")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("GROVE_MODEL__GUIDED"), "{err}");
        let err = read(None, vars(&[("GROVE_NET__REQUEST_TIMEOUT_SECS", "1e30")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("`net.request_timeout_secs`"), "{err}");
    }

    #[test]
    fn environment_lists_and_unset_values() {
        let s = read(
            None,
            vars(&[
                (
                    "GROVE_NET__LISTEN",
                    "/ip4/127.0.0.1/tcp/1, /ip4/127.0.0.1/tcp/2",
                ),
                ("GROVE_HOOKS__ARGS", r#"["a,b", "c"]"#),
            ]),
        )
        .unwrap();
        assert_eq!(s.net.listen.len(), 2);
        assert_eq!(s.hooks.args, vec!["a,b", "c"]);
        let s = read(
            Some(("[node]\nname = \"x\"\n", "f.toml")),
            vars(&[("GROVE_NODE__NAME", "")]),
        )
        .unwrap();
        assert_eq!(s.node.name, None);
    }

    #[test]
    fn a_long_bad_value_is_shown_shortened() {
        let long = "x".repeat(1 << 20);
        for text in [
            format!("x{long} = 1\n"),
            format!("[net]\nx{long} = 1\n"),
            format!("[model]\nbackend = \"{long}\"\n"),
            format!("[net]\nlisten = \"{long}\"\n"),
            format!("[net]\nreachability = \"{long} {long}\"\n"),
            format!("[node]\nname = \"{long}\n"),
        ] {
            let err = read(Some((&text, "f.toml")), vec![])
                .and_then(|s| s.check(crate::config::Overrides::default()))
                .unwrap_err()
                .to_string();
            assert!(err.len() < 400, "{}", &err[..400]);
        }
    }
}
