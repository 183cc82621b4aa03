//! Turn policy: whether a tree speaks when its node is asked for a turn.
//! Pure: the node measures (the best search score, the time taken) and this
//! module decides and words the reason that goes into the signed turn.

use serde::Deserialize;

use crate::settings::Invalid;

/// How a node decides whether its tree speaks (config key `speaker.policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyKind {
    /// The tree speaks on every turn it is asked for.
    #[default]
    Always,
    /// The tree passes when its own book has nothing on the turn's query
    /// scoring above `speaker.min_score`.
    GroundedOnly,
}

impl PolicyKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyKind::Always => "always",
            PolicyKind::GroundedOnly => "grounded-only",
        }
    }
}

/// The speaker side of cross-node moots (config section `speaker`).
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicySettings {
    pub policy: PolicyKind,
    /// `grounded-only` passes unless some passage scores above this (scores
    /// as `book search` reports them: FTS5 bm25 negated, higher is better).
    pub min_score: f64,
    /// How long the policy may take to decide; past it the tree speaks and
    /// the reason says so.
    pub decide_timeout_ms: u64,
}

impl Default for PolicySettings {
    fn default() -> Self {
        PolicySettings {
            policy: PolicyKind::Always,
            min_score: 1.0,
            decide_timeout_ms: 2_000,
        }
    }
}

impl PolicySettings {
    /// Refuses settings no node can run with: the key and the reason.
    pub fn validate(&self) -> Result<(), Invalid> {
        if !self.min_score.is_finite() {
            return Err(Invalid::new("speaker.min_score", "must be a finite number"));
        }
        if !(1..=60_000).contains(&self.decide_timeout_ms) {
            return Err(Invalid::new(
                "speaker.decide_timeout_ms",
                format!(
                    "must be between 1 and 60000 (it is {})",
                    self.decide_timeout_ms
                ),
            ));
        }
        Ok(())
    }
}

/// Whether a tree spoke on a turn, as recorded in the turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub speak: bool,
    /// The policy that decided (`always`, `grounded-only`).
    pub policy: String,
    pub reason: String,
    /// How long deciding took.
    pub ms: u64,
}

impl Decision {
    /// `speak` or `pass`, as transcripts write it.
    pub fn action(&self) -> &'static str {
        if self.speak { "speak" } else { "pass" }
    }
}

/// What the policy needs measured before it can decide.
pub fn needs_search(kind: PolicyKind) -> bool {
    kind == PolicyKind::GroundedOnly
}

/// Decides from the best score the book's search gave the turn's query
/// (`None`: no passage matched any word of it).
pub fn decide(settings: &PolicySettings, best_score: Option<f64>, ms: u64) -> Decision {
    let (speak, reason) = match settings.policy {
        PolicyKind::Always => (true, "the policy is to always speak".to_string()),
        PolicyKind::GroundedOnly => match best_score {
            Some(score) if score > settings.min_score => (
                true,
                format!(
                    "best passage scores {score:.3}, above {:.3}",
                    settings.min_score
                ),
            ),
            Some(score) => (
                false,
                format!(
                    "best passage scores {score:.3}, not above {:.3}",
                    settings.min_score
                ),
            ),
            None => (false, "no passage matches the turn's words".to_string()),
        },
    };
    Decision {
        speak,
        policy: settings.policy.as_str().to_string(),
        reason,
        ms,
    }
}

/// The policy could not decide (it failed, or ran past its time bound):
/// the tree speaks rather than being silenced, and the reason says why.
pub fn undecided(settings: &PolicySettings, why: &str, ms: u64) -> Decision {
    Decision {
        speak: true,
        policy: settings.policy.as_str().to_string(),
        reason: format!("the policy did not decide ({why}); speaking"),
        ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grounded_only(min_score: f64) -> PolicySettings {
        PolicySettings {
            policy: PolicyKind::GroundedOnly,
            min_score,
            ..PolicySettings::default()
        }
    }

    #[test]
    fn always_speaks_whatever_the_score() {
        let d = decide(&PolicySettings::default(), None, 0);
        assert!(d.speak);
        assert_eq!(d.policy, "always");
        assert_eq!(d.action(), "speak");
    }

    #[test]
    fn grounded_only_passes_at_or_below_the_threshold() {
        let s = grounded_only(2.0);
        assert!(decide(&s, Some(2.5), 3).speak);
        let at = decide(&s, Some(2.0), 3);
        assert!(!at.speak);
        assert_eq!(at.action(), "pass");
        assert!(at.reason.contains("not above 2.000"), "{}", at.reason);
        let none = decide(&s, None, 3);
        assert!(!none.speak);
        assert_eq!(none.ms, 3);
    }

    #[test]
    fn an_undecided_policy_speaks_and_says_why() {
        let d = undecided(&grounded_only(1.0), "timed out after 5 ms", 5);
        assert!(d.speak);
        assert!(d.reason.contains("timed out"), "{}", d.reason);
    }

    #[test]
    fn settings_are_checked() {
        assert!(PolicySettings::default().validate().is_ok());
        let nan = PolicySettings {
            min_score: f64::NAN,
            ..PolicySettings::default()
        };
        assert_eq!(nan.validate().unwrap_err().key, "speaker.min_score");
        let zero = PolicySettings {
            decide_timeout_ms: 0,
            ..PolicySettings::default()
        };
        assert!(zero.validate().is_err());
    }
}
