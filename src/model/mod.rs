//! The node's local model behind one chat-completion interface.
//!
//! The moot engine only sees [`ChatModel`]; backends (an OpenAI-compatible
//! server, an embedded GGUF model) live in submodules and are chosen by
//! [`ModelSettings::backend`] through [`open_model`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use grove_core::settings::Invalid;
use serde::Deserialize;

pub mod embedded;
pub mod hub;
pub mod install;
pub mod memory;
pub mod openai;

// The chat types the moot engine and the guide share are the core's.
pub use grove_core::chat::*;
pub use grove_core::guide::{self, Guidance};
pub use grove_core::sampling;

/// Which backend runs the node's model.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// A GGUF model run in-process (no server needed).
    #[default]
    Embedded,
    /// Any OpenAI-compatible `/v1/chat/completions` server.
    Openai,
}

/// Whether the embedded backend's llama.cpp takes its flash-attention
/// path (`model.flash_attention`). On a CPU it reads a long prompt faster
/// and, on a machine without AVX-512, generates after a long prompt
/// slower (docs/model.md, "Figures").
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FlashAttention {
    /// llama.cpp decides (on, where the backend has the path).
    #[default]
    Auto,
    On,
    Off,
}

impl FlashAttention {
    /// The setting's name, as the config spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            FlashAttention::Auto => "auto",
            FlashAttention::On => "on",
            FlashAttention::Off => "off",
        }
    }
}

/// The `[model]` settings (env: `GROVE_MODEL__<KEY>`).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelSettings {
    /// `embedded` or `openai`.
    pub backend: Backend,
    /// Base URL of the OpenAI-compatible server (`http://host:port`, with or
    /// without `/v1`, or the full `.../chat/completions` URL).
    pub url: String,
    /// Model name sent to the server; empty sends none (llama.cpp's server
    /// serves whatever it loaded).
    pub name: String,
    /// GGUF file for the embedded backend. Relative paths are taken under
    /// `<state_dir>/models/`; unset picks the installed default model.
    pub path: Option<PathBuf>,
    /// Name of the environment variable holding the API key (the key itself
    /// never goes in a config file). Empty: no key is sent.
    pub api_key_env: String,
    /// Seconds to wait for a TCP/TLS connection to the server.
    pub connect_timeout_secs: u64,
    /// Seconds to wait for the server to answer one request; a small model on
    /// a busy CPU can take minutes for a long prompt.
    pub timeout_secs: u64,
    /// Retries after a connection error or a 5xx/429 answer (0: try once).
    pub max_retries: u32,
    /// Threads for the embedded backend: at most this many (0: no cap) of
    /// the cores the process may run on (`sched_getaffinity`). Every core
    /// is the fastest on a quiet node; on one busy with other work, fewer
    /// threads leave it room (see docs/model.md).
    pub threads: usize,
    /// Layers the embedded backend offloads to a GPU (0: none). Only a
    /// binary built with a GPU feature (`cuda`, `vulkan`, `metal`) has a
    /// GPU backend; without one llama.cpp runs every layer on the CPU.
    pub gpu_layers: u32,
    /// The embedded backend's attention path: `auto` (llama.cpp decides),
    /// `on` or `off`.
    pub flash_attention: FlashAttention,
    /// Guided decoding for the embedded backend: in moot turns, quotes are
    /// verbatim passage text and tags valid by construction. `false` turns
    /// it off (for comparison); other backends ignore it.
    pub guided: bool,
    /// openai backend: send moot turns a llama.cpp `grammar` (GBNF) under
    /// which `[` only opens a valid tag group. Off by default: servers
    /// without grammar support may refuse the unknown field.
    pub grammar: bool,
    /// Where `grove model install --hub` downloads from: the Hugging Face
    /// hub, or a mirror laid out like it (`{hub_url}/{repo}/resolve/...`).
    pub hub_url: String,
}

impl Default for ModelSettings {
    fn default() -> Self {
        ModelSettings {
            backend: Backend::Embedded,
            url: "http://127.0.0.1:8080".to_string(),
            name: String::new(),
            path: None,
            api_key_env: String::new(),
            connect_timeout_secs: 10,
            timeout_secs: 600,
            max_retries: 3,
            threads: 0,
            gpu_layers: 0,
            flash_attention: FlashAttention::Auto,
            guided: true,
            grammar: false,
            hub_url: hub::DEFAULT_HUB_URL.to_string(),
        }
    }
}

impl ModelSettings {
    /// Checks values that deserialization cannot; the error names the key.
    pub fn validate(&self) -> Result<(), ModelError> {
        self.check()
            .map_err(|e| ModelError::Config(format!("{} {}", e.key, e.reason)))
    }

    /// The same check, as the key and why.
    pub fn check(&self) -> Result<(), Invalid> {
        // The two timeouts are added to each other and to an Instant.
        for (key, value, max) in [
            ("model.connect_timeout_secs", self.connect_timeout_secs, 600),
            ("model.timeout_secs", self.timeout_secs, 86_400),
            ("model.max_retries", self.max_retries.into(), 10),
            ("model.threads", self.threads as u64, MAX_THREADS as u64),
            (
                "model.gpu_layers",
                self.gpu_layers.into(),
                MAX_GPU_LAYERS.into(),
            ),
        ] {
            let min = u64::from(key.ends_with("_secs"));
            if !(min..=max).contains(&value) {
                return Err(Invalid::new(
                    key,
                    format!("must be between {min} and {max} (it is {value})"),
                ));
            }
        }
        hub::check_endpoint(&self.hub_url).map_err(|_| {
            Invalid::new(
                "model.hub_url",
                format!(
                    "`{}` must be an http:// or https:// URL",
                    grove_core::settings::shown(&self.hub_url)
                ),
            )
        })?;
        if self.backend == Backend::Openai {
            if self.url.trim().is_empty() {
                return Err(Invalid::new(
                    "model.url",
                    "must be set for the openai backend",
                ));
            }
            openai::chat_endpoint(&self.url).map_err(|_| {
                Invalid::new(
                    "model.url",
                    format!(
                        "`{}` must start with http:// or https://",
                        grove_core::settings::shown(&self.url)
                    ),
                )
            })?;
        }
        // GROVE_* variables are read as settings, and an unknown key is refused,
        // so a key stored under such a name would break loading the config.
        if self.api_key_env.starts_with("GROVE_") {
            return Err(Invalid::new(
                "model.api_key_env",
                format!(
                    "`{}` must not start with GROVE_ (those variables are settings)",
                    grove_core::settings::shown(&self.api_key_env)
                ),
            ));
        }
        Ok(())
    }

    /// The GGUF file the embedded backend loads.
    pub fn model_path(&self, state_dir: &Path) -> PathBuf {
        let dir = install::model_dir(state_dir);
        match &self.path {
            Some(path) if path.is_absolute() => path.clone(),
            Some(path) => dir.join(path),
            None => install::default_model_file(&dir),
        }
    }
}

impl ModelSettings {
    /// What the answers of this model depend on, without loading it: the
    /// backend, and the GGUF file (name and size), guidance and threads,
    /// or the server and model name. Asks are cached under it.
    pub fn profile(&self, state_dir: &Path) -> String {
        match self.backend {
            Backend::Openai => format!("openai:{}:{}", self.url, self.name),
            Backend::Embedded => {
                let path = self.model_path(state_dir);
                let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                format!(
                    "embedded:{}:{size}:guided={}:threads={}",
                    path.file_name().unwrap_or_default().to_string_lossy(),
                    self.guided,
                    embedded_threads(self.threads, usable_cores())
                )
            }
        }
    }
}

/// Most threads `model.threads` asks for.
pub const MAX_THREADS: usize = 256;

/// Most layers `model.gpu_layers` offloads (more than any model has).
pub const MAX_GPU_LAYERS: u32 = 1000;

/// Threads for the embedded model: the cores it may use, capped by the
/// setting (0: no cap).
pub fn embedded_threads(setting: usize, cores: usize) -> usize {
    let cores = cores.max(1);
    if setting > 0 {
        setting.min(cores)
    } else {
        cores
    }
}

/// The cores this process may run on: its `sched_getaffinity` mask (and
/// cgroup quota), as the standard library reads them.
pub fn usable_cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The embedded forward's threads when no setting is passed (the bench and
/// tests): `GROVE_MODEL__THREADS` (the setting's own variable, so tests
/// running side by side can share the cores), capped by the usable cores.
pub fn configured_threads() -> usize {
    let setting = std::env::var("GROVE_MODEL__THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    embedded_threads(setting, usable_cores())
}

/// Opens the configured backend. The embedded backend loads its GGUF file
/// here (about a second); the openai backend only builds its HTTP client.
/// Makes a model file private to its user (0600), like every file of a
/// state directory, before it is renamed into place.
pub(crate) fn set_private(path: &Path) -> Result<(), ModelError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| ModelError::File(format!("cannot make {} private: {e}", path.display())))
}

pub fn open_model(
    settings: &ModelSettings,
    state_dir: &Path,
) -> Result<Box<dyn ChatModel + Send>, ModelError> {
    settings.validate()?;
    match settings.backend {
        Backend::Openai => {
            let config = openai::OpenAiConfig::from_settings(settings)?;
            Ok(Box::new(openai::OpenAiModel::new(config)?))
        }
        Backend::Embedded => {
            let path = settings.model_path(state_dir);
            Ok(Box::new(embedded::EmbeddedModel::load(
                &path,
                embedded::EmbeddedOptions {
                    guided: settings.guided,
                    threads: embedded_threads(settings.threads, usable_cores()),
                    gpu_layers: settings.gpu_layers,
                    flash_attention: settings.flash_attention,
                    ..embedded::EmbeddedOptions::default()
                },
            )?))
        }
    }
}

/// Seconds as a [`Duration`]; kept here so settings stay plain integers.
fn secs(value: u64) -> Duration {
    Duration::from_secs(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_default_is_valid_and_embedded() {
        let settings = ModelSettings::default();
        assert!(settings.validate().is_ok());
        assert_eq!(settings.backend, Backend::Embedded);
    }

    #[test]
    fn grove_prefixed_key_variable_is_refused() {
        let settings = ModelSettings {
            api_key_env: "GROVE_KEY".into(),
            ..ModelSettings::default()
        };
        let err = settings.validate().unwrap_err().to_string();
        assert!(err.contains("GROVE_"), "{err}");
    }

    #[test]
    fn threads_are_the_usable_cores_capped_by_the_setting() {
        assert_eq!(embedded_threads(0, 2), 2);
        assert_eq!(embedded_threads(0, 1), 1);
        assert_eq!(embedded_threads(0, 0), 1);
        assert_eq!(embedded_threads(1, 2), 1);
        assert_eq!(embedded_threads(3, 8), 3);
        assert_eq!(embedded_threads(16, 8), 8);
    }

    #[test]
    fn zero_timeout_is_refused() {
        let settings = ModelSettings {
            timeout_secs: 0,
            ..ModelSettings::default()
        };
        assert!(settings.validate().is_err());
    }

    #[test]
    fn relative_model_path_is_under_the_model_dir() {
        let state = Path::new("/var/lib/grove");
        let settings = ModelSettings {
            path: Some("custom.gguf".into()),
            ..ModelSettings::default()
        };
        assert_eq!(
            settings.model_path(state),
            Path::new("/var/lib/grove/models/custom.gguf")
        );
        let absolute = ModelSettings {
            path: Some("/opt/m.gguf".into()),
            ..ModelSettings::default()
        };
        assert_eq!(absolute.model_path(state), Path::new("/opt/m.gguf"));
    }

    #[test]
    fn backend_names_parse_from_toml_strings() {
        #[derive(Deserialize)]
        struct Wrapper {
            model: ModelSettings,
        }
        let parsed: Wrapper =
            serde_json::from_str(r#"{"model":{"backend":"openai","url":"http://x:1"}}"#)
                .expect("valid json");
        assert_eq!(parsed.model.backend, Backend::Openai);
        let bad = serde_json::from_str::<Wrapper>(r#"{"model":{"bakend":"openai"}}"#);
        assert!(bad.is_err());
    }

    #[test]
    fn flash_attention_is_auto_on_or_off() {
        #[derive(Deserialize)]
        struct Wrapper {
            model: ModelSettings,
        }
        let read = |v: &str| {
            serde_json::from_str::<Wrapper>(&format!(r#"{{"model":{{"flash_attention":"{v}"}}}}"#))
                .map(|w| w.model.flash_attention)
        };
        assert_eq!(
            ModelSettings::default().flash_attention,
            FlashAttention::Auto
        );
        assert_eq!(read("auto").unwrap(), FlashAttention::Auto);
        assert_eq!(read("on").unwrap(), FlashAttention::On);
        assert_eq!(read("off").unwrap(), FlashAttention::Off);
        let err = read("sometimes").unwrap_err().to_string();
        assert!(err.contains("auto") && err.contains("off"), "{err}");
    }
}
