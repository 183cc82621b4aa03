//! Asking the books as both sides of the control socket run it: the request
//! (`POST /v1/ask`) and its answer, and [`ask`], the one sequence of an
//! ask (the question checked, the cache looked up and judged, retrieval,
//! the model's claim lines, the answer kept) over [`AskParts`]: this
//! process's store and model when no daemon runs ([`LocalAsk`]), the
//! daemon's workers and the mesh when one does.

use std::cell::{OnceCell, RefCell};
use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{ApiError, ErrorKind};
use crate::ask::cache::{
    CacheMode, Found, RootChange, answer_key, cited_books, cited_roots, judge, lookup_key,
};
use crate::ask::{AskRecord, AskSettings, Evidence, QuestionError, Retrieval, check_question};
use crate::merkle::Hash;
use crate::model::{ModelError, ModelSettings};
use crate::store::Store;
use crate::store::ask_cache::AskCache;

/// The most passages an ask answers from (one claim line each).
pub const MAX_ASK_K: u32 = 12;

/// `grove ask`, as the CLI sends it (`POST /v1/ask`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AskCall {
    pub question: String,
    /// The books asked; empty: every book (of this node, or of the mesh).
    #[serde(default)]
    pub books: Vec<String>,
    pub k: u32,
    pub temperature: f64,
    pub seed: u64,
    /// How a cached answer is matched; `None`: the model is asked every
    /// time.
    pub cache: Option<CacheChoice>,
    /// Every member's books, each passage proven against the root its
    /// holder announced.
    #[serde(default)]
    pub mesh: bool,
}

/// `--cache strict|equivalent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheChoice {
    Strict,
    Equivalent,
}

impl From<CacheChoice> for CacheMode {
    fn from(c: CacheChoice) -> CacheMode {
        match c {
            CacheChoice::Strict => CacheMode::Strict,
            CacheChoice::Equivalent => CacheMode::Equivalent,
        }
    }
}

/// An answered ask: the record, what the cache did, and who could not
/// answer a mesh ask.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Answered {
    pub record: AskRecord,
    pub cache: CacheNote,
    /// Members that did not answer, or whose passages failed their proofs;
    /// the answer went on without them.
    #[serde(default)]
    pub errors: Vec<String>,
}

/// What the cache did for an ask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "served")]
pub enum CacheNote {
    /// The model answered (no answer was cached, or the cache is off).
    Asked,
    /// Served from the cache: the cited books' roots are unchanged.
    Hit,
    /// A cached answer was found but these books changed; asked again.
    Stale { changed: Vec<RootChange> },
}

/// What retrieval found, and who could not answer it.
#[derive(Debug, Clone, Default)]
pub struct Retrieved {
    pub retrieval: Retrieval,
    pub errors: Vec<String>,
}

/// What an ask runs on.
pub trait AskParts {
    /// The model's profile, for the cache key.
    fn profile(&self) -> String;
    /// The answer stored under `lookup` and its answer key.
    fn cached(&self, lookup: &Hash) -> Result<Option<(Hash, AskRecord)>, ApiError>;
    /// Each cited book's root now, where it would be retrieved from again
    /// (`None`: no longer held).
    fn now_roots(
        &self,
        cited: &[&Evidence],
        mesh: bool,
    ) -> Result<BTreeMap<String, Option<String>>, ApiError>;
    /// The passages for `question`, pointers `E1..`.
    fn retrieve(&self, question: &str, call: &AskCall) -> Result<Retrieved, ApiError>;
    /// The model's claim lines over `retrieval`, verified.
    fn answer(
        &self,
        question: &str,
        retrieval: Retrieval,
        settings: &AskSettings,
    ) -> Result<AskRecord, ApiError>;
    /// Keeps `record` under `lookup` and `answer_key`.
    fn keep(&self, lookup: &Hash, answer_key: &Hash, record: &AskRecord) -> Result<(), ApiError>;
}

impl From<QuestionError> for ApiError {
    fn from(e: QuestionError) -> ApiError {
        ApiError::bad_request(e.to_string())
    }
}

/// A model that did not answer: down or timed out is `Unavailable`.
pub fn model_error(e: ModelError) -> ApiError {
    let kind = match e {
        ModelError::Unreachable(_) => ErrorKind::Unavailable,
        ModelError::Config(_) | ModelError::File(_) | ModelError::TooLarge(_) => {
            ErrorKind::Conflict
        }
        _ => ErrorKind::Internal,
    };
    ApiError::new(kind, format!("the model did not answer: {e}"))
}

/// One ask, start to end.
pub fn ask(call: &AskCall, parts: &dyn AskParts) -> Result<Answered, ApiError> {
    let question = check_question(&call.question)?;
    if call.k == 0 || call.k > MAX_ASK_K {
        return Err(ApiError::bad_request(format!(
            "k must be between 1 and {MAX_ASK_K}"
        )));
    }
    let settings = AskSettings {
        k: call.k,
        temperature: call.temperature,
        seed: call.seed,
        ..AskSettings::default()
    };
    let lookup = call.cache.map(|mode| {
        let profile = parts.profile();
        lookup_key(
            &question,
            mode.into(),
            &profile,
            &settings,
            &call.books,
            call.mesh,
        )
    });
    let mut cache = CacheNote::Asked;
    if let Some(lookup) = &lookup {
        let stored = parts.cached(lookup)?;
        let cited = stored
            .as_ref()
            .map(|(_, r)| cited_books(r))
            .unwrap_or_default();
        let now = parts.now_roots(&cited, call.mesh)?;
        match judge(lookup, stored, &now) {
            Found::Fresh(record) => {
                return Ok(Answered {
                    record: *record,
                    cache: CacheNote::Hit,
                    errors: Vec::new(),
                });
            }
            Found::Stale(changed) => cache = CacheNote::Stale { changed },
            Found::Nothing => {}
        }
    }
    let Retrieved { retrieval, errors } = parts.retrieve(&question, call)?;
    let record = parts.answer(&question, retrieval, &settings)?;
    // An answer from no evidence is not kept: a book added later may hold
    // what this one could not find; nor one some member did not answer.
    if let Some(lookup) = &lookup
        && !record.evidence.is_empty()
        && errors.is_empty()
    {
        parts.keep(lookup, &answer_key(lookup, &cited_roots(&record)), &record)?;
    }
    Ok(Answered {
        record,
        cache,
        errors,
    })
}

/// An ask in this process, on the state directory's own books and model
/// (no daemon runs): local books only.
pub struct LocalAsk<'a> {
    pub state_dir: &'a Path,
    pub model: &'a ModelSettings,
    /// The store handle; borrowed for one call at a time (an ask in this
    /// process runs its stages in order).
    store: RefCell<Store>,
    cache: OnceCell<AskCache>,
}

impl<'a> LocalAsk<'a> {
    pub fn new(state_dir: &'a Path, model: &'a ModelSettings) -> LocalAsk<'a> {
        LocalAsk {
            state_dir,
            model,
            store: RefCell::new(Store::new(state_dir)),
            cache: OnceCell::new(),
        }
    }

    /// `ask.db`, opened on first use.
    fn cache(&self) -> Result<&AskCache, ApiError> {
        if let Some(c) = self.cache.get() {
            return Ok(c);
        }
        let opened =
            AskCache::open(self.state_dir).map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(self.cache.get_or_init(|| opened))
    }
}

impl AskParts for LocalAsk<'_> {
    fn profile(&self) -> String {
        self.model.profile(self.state_dir)
    }

    fn cached(&self, lookup: &Hash) -> Result<Option<(Hash, AskRecord)>, ApiError> {
        // A state directory not made yet holds no books, and so no answers.
        if !self.state_dir.is_dir() {
            return Ok(None);
        }
        self.cache()?
            .get(lookup)
            .map_err(|e| ApiError::internal(e.to_string()))
    }

    fn now_roots(
        &self,
        cited: &[&Evidence],
        _mesh: bool,
    ) -> Result<BTreeMap<String, Option<String>>, ApiError> {
        Ok(self
            .store
            .borrow_mut()
            .current_roots(cited.iter().map(|e| e.book.clone()))?)
    }

    fn retrieve(&self, question: &str, call: &AskCall) -> Result<Retrieved, ApiError> {
        if call.mesh {
            return Err(ApiError::unavailable(
                "a mesh ask goes through the daemon: start it with `grove node run`",
            ));
        }
        Ok(Retrieved {
            retrieval: Retrieval {
                books: call.books.clone(),
                evidence: self.store.borrow_mut().evidence(
                    question,
                    &call.books,
                    call.k as usize,
                )?,
                mesh: None,
            },
            errors: Vec::new(),
        })
    }

    fn answer(
        &self,
        question: &str,
        retrieval: Retrieval,
        settings: &AskSettings,
    ) -> Result<AskRecord, ApiError> {
        let mut model =
            crate::model::open_model(self.model, self.state_dir).map_err(model_error)?;
        crate::ask::answer(&mut *model, question, retrieval, settings).map_err(model_error)
    }

    fn keep(&self, lookup: &Hash, answer_key: &Hash, record: &AskRecord) -> Result<(), ApiError> {
        self.cache()?
            .put(lookup, answer_key, record, crate::now_ms())
            .map_err(|e| ApiError::internal(e.to_string()))
    }
}
