//! An attempt's timeout as written (`config.timeout` of a state or of the document, or
//! the operator's `[timeouts]`): a duration, or `none` for no limit; and the limit an
//! attempt ends up with, with where it came from ([`AttemptLimit`]).
//!
//! The order, said once: the state's `timeout`, else the document's `config.timeout`,
//! else the operator's default for the state's action, else the action's built-in
//! default (the engine knows both; see `ActionRegistry::attempt_limit`).

use std::fmt;
use std::time::Duration;

use serde_json::Value;

/// The word that writes "no limit".
pub const NONE: &str = "none";

/// A timeout as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeout {
    /// Attempts end after this long.
    After(Duration),
    /// `none`: attempts are not bounded.
    Unbounded,
}

impl Timeout {
    /// The bound, if there is one.
    pub fn duration(self) -> Option<Duration> {
        match self {
            Timeout::After(d) => Some(d),
            Timeout::Unbounded => None,
        }
    }

    /// A written timeout: seconds as a number, a duration as text (`500ms`, `30s`,
    /// `2m`, `1h 30m`), or `none`. The error says what is wrong with it.
    pub fn parse(value: &Value) -> Result<Timeout, String> {
        let (written, parsed) = match value {
            Value::Number(n) => {
                let secs = n.as_f64().unwrap_or(-1.0);
                if secs <= 0.0 {
                    return Err(format!("`{n}` is not a positive duration"));
                }
                let parsed = Duration::try_from_secs_f64(secs)
                    .map_err(|_| format!("`{n}` seconds is too large for a duration"));
                (n.to_string(), parsed)
            }
            Value::String(s) if s.trim() == NONE => return Ok(Timeout::Unbounded),
            Value::String(s) => {
                let parsed = humantime::parse_duration(s.trim()).map_err(|e| {
                    format!(
                        "`{s}` is not a duration ({e}); write e.g. `500ms`, `30s`, `2m`, \
                         `1h 30m`, or `none` for no limit"
                    )
                });
                (s.clone(), parsed)
            }
            other => return Err(format!("`{other}` is not a duration")),
        };
        match parsed? {
            d if d.is_zero() => Err(format!(
                "`{written}` is not a positive duration; write e.g. `500ms`, `30s`, `2m`"
            )),
            d => Ok(Timeout::After(d)),
        }
    }
}

impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Timeout::After(d) => write!(f, "{}", humantime::format_duration(*d)),
            Timeout::Unbounded => f.write_str(NONE),
        }
    }
}

/// Read from a config file (`[timeouts] command = "2s"`): as [`Timeout::parse`] reads it.
impl<'de> serde::Deserialize<'de> for Timeout {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Timeout::parse(&value).map_err(serde::de::Error::custom)
    }
}

/// Where an attempt's limit comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitSource {
    /// The state's `config.timeout`.
    State,
    /// The document's `config.timeout`.
    Document,
    /// The operator's default for the state's action (`[timeouts]` in claij.toml).
    Operator,
    /// The state's action's built-in default.
    BuiltIn,
}

impl fmt::Display for LimitSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LimitSource::State => "the state's config.timeout",
            LimitSource::Document => "the document's config.timeout",
            LimitSource::Operator => "the operator's [timeouts] default",
            LimitSource::BuiltIn => "the action's built-in default",
        })
    }
}

/// The limit of one attempt of a state, and where it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptLimit {
    /// The limit (`Unbounded`: none).
    pub timeout: Timeout,
    /// Where it comes from.
    pub source: LimitSource,
}

impl AttemptLimit {
    /// The limit in the resolution order: `state`'s, else `document`'s, else
    /// `operator`'s, else `built_in` (`None`: the action has no default — unbounded).
    pub fn resolve(
        state: Option<Timeout>,
        document: Option<Timeout>,
        operator: Option<Timeout>,
        built_in: Option<Duration>,
    ) -> AttemptLimit {
        let written = [
            (state, LimitSource::State),
            (document, LimitSource::Document),
            (operator, LimitSource::Operator),
        ];
        written
            .into_iter()
            .find_map(|(t, source)| t.map(|timeout| AttemptLimit { timeout, source }))
            .unwrap_or(AttemptLimit {
                timeout: built_in.map_or(Timeout::Unbounded, Timeout::After),
                source: LimitSource::BuiltIn,
            })
    }

    /// Whether `timeout: none` in the document (state or top-level) leaves attempts
    /// unbounded: what `claij validate` warns about.
    pub fn written_none(&self) -> bool {
        self.timeout == Timeout::Unbounded
            && matches!(self.source, LimitSource::State | LimitSource::Document)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const S: Timeout = Timeout::After(Duration::from_secs(1));
    const D: Timeout = Timeout::After(Duration::from_secs(2));
    const O: Timeout = Timeout::After(Duration::from_secs(3));
    const B: Duration = Duration::from_secs(4);

    fn resolved(
        s: Option<Timeout>,
        d: Option<Timeout>,
        o: Option<Timeout>,
        b: Option<Duration>,
    ) -> (Timeout, LimitSource) {
        let l = AttemptLimit::resolve(s, d, o, b);
        (l.timeout, l.source)
    }

    #[test]
    fn the_state_wins_then_the_document_then_the_operator_then_the_action() {
        assert_eq!(
            resolved(Some(S), Some(D), Some(O), Some(B)),
            (S, LimitSource::State)
        );
        assert_eq!(
            resolved(None, Some(D), Some(O), Some(B)),
            (D, LimitSource::Document)
        );
        assert_eq!(
            resolved(None, None, Some(O), Some(B)),
            (O, LimitSource::Operator)
        );
        assert_eq!(
            resolved(None, None, None, Some(B)),
            (Timeout::After(B), LimitSource::BuiltIn)
        );
        assert_eq!(
            resolved(None, None, None, None),
            (Timeout::Unbounded, LimitSource::BuiltIn)
        );
    }

    #[test]
    fn none_written_anywhere_wins_over_what_comes_after_it() {
        let none = Some(Timeout::Unbounded);
        let by_state = AttemptLimit::resolve(none, Some(D), Some(O), Some(B));
        assert_eq!(by_state.timeout, Timeout::Unbounded);
        assert!(by_state.written_none());
        let by_document = AttemptLimit::resolve(None, none, Some(O), Some(B));
        assert_eq!(by_document.source, LimitSource::Document);
        assert!(by_document.written_none());
        let by_operator = AttemptLimit::resolve(None, None, none, Some(B));
        assert_eq!(by_operator.timeout, Timeout::Unbounded);
        assert!(!by_operator.written_none());
        // A state's own duration beats a document's `none`.
        assert_eq!(AttemptLimit::resolve(Some(S), none, None, None).timeout, S);
    }

    #[test]
    fn timeouts_parse_as_durations_or_none() {
        assert_eq!(Timeout::parse(&json!("none")), Ok(Timeout::Unbounded));
        assert_eq!(Timeout::parse(&json!("2s")), Ok(D));
        assert_eq!(Timeout::parse(&json!(3)), Ok(O));
        assert!(Timeout::parse(&json!("0s")).is_err());
        assert!(Timeout::parse(&json!(0)).is_err());
        assert!(Timeout::parse(&json!("soon")).unwrap_err().contains("none"));
        assert_eq!(Timeout::Unbounded.to_string(), "none");
        assert_eq!(D.to_string(), "2s");
    }
}
