//! A policy's declarative configuration, read from JS data: the core's
//! [`PolicyConfig`] filled in field by field through [`JsValueIn`], as both
//! JS bindings read every other option.
//!
//! The JS layer hands over plain data as `JSON.parse` makes it: it parses
//! JSON text with the engine's own parser, and sends an object through
//! `JSON.stringify` first (NaN, the infinities and BigInts then arrive as
//! strings, refused here by name). So neither binding ships a JSON parser:
//! in the WebAssembly build, serde_json and serde's readers were a quarter
//! of the download.
//!
//! The fields and their defaults are those of [`LimitConfig`]. A value of
//! the wrong shape, or a field no limit has, is a [`Failure::Config`] naming
//! its place (`limits[1].burst`); a value of the right shape that the core
//! refuses (a zero burst) is the core's own error.

use ratekeeper::{Algorithm, Calendar, Eviction, LimitConfig, Policy, PolicyConfig};

use crate::shared::{count, Failure, JsValueIn, Kind};

/// The fields of a limit, in [`LimitConfig`]'s order.
const LIMIT_FIELDS: [&str; 8] = [
    "name",
    "algorithm",
    "rate",
    "burst",
    "calendar",
    "by",
    "max_keys",
    "eviction",
];

/// `new Policy(config)`: `{ limits: [...] }`.
pub fn policy_from_config<V: JsValueIn>(config: &V) -> Result<Policy, Failure<V::Js>> {
    known_fields(config, "config", &["limits"])?;
    let list = config.get("limits")?;
    let len = match list.kind()? {
        Kind::Array(len) => len,
        Kind::Absent => return Err(shape("config", "missing field `limits`")),
        other => return Err(expected("limits", "an array", &other)),
    };
    let mut limits = Vec::with_capacity(len as usize);
    for i in 0..len {
        limits.push(limit(&list.at(i)?, &format!("limits[{i}]"))?);
    }
    Ok(PolicyConfig { limits }.policy()?)
}

/// One element of `limits`, at `path`.
fn limit<V: JsValueIn>(value: &V, path: &str) -> Result<LimitConfig, Failure<V::Js>> {
    known_fields(value, path, &LIMIT_FIELDS)?;
    let field = |name: &'static str| -> Result<(Kind, String), Failure<V::Js>> {
        Ok((value.get(name)?.kind()?, format!("{path}.{name}")))
    };
    let required = |name: &'static str| -> Result<String, Failure<V::Js>> {
        match field(name)? {
            (Kind::String(s), _) => Ok(s),
            (Kind::Absent, _) => Err(shape(path, &format!("missing field `{name}`"))),
            (other, at) => Err(expected(&at, "a string", &other)),
        }
    };
    let whole = |name: &'static str| -> Result<Option<u64>, Failure<V::Js>> {
        match field(name)? {
            (Kind::Absent, _) => Ok(None),
            (Kind::Number(n), at) => count(n, name)
                .map(Some)
                .map_err(|_| shape(&at, "expected a whole number from 0 to 2^53 - 1")),
            (other, at) => Err(expected(&at, "a number", &other)),
        }
    };
    Ok(LimitConfig {
        name: required("name")?,
        algorithm: named(field("algorithm")?, &Algorithm::ALL, Algorithm::name)?
            .unwrap_or_default(),
        rate: required("rate")?,
        burst: whole("burst")?,
        calendar: named(field("calendar")?, &Calendar::ALL, Calendar::name)?,
        by: strings(value.get("by")?, &format!("{path}.by"))?,
        max_keys: whole("max_keys")?,
        eviction: named(field("eviction")?, &Eviction::ALL, Eviction::name)?,
    })
}

/// An optional value of `all`, given by its name (spelled as the core's
/// configuration spells it, as serde reads it).
fn named<T: Copy, J>(
    (kind, at): (Kind, String),
    all: &[T],
    name: fn(T) -> &'static str,
) -> Result<Option<T>, Failure<J>> {
    match kind {
        Kind::Absent => Ok(None),
        Kind::String(s) => match all.iter().find(|&&value| name(value) == s) {
            Some(&value) => Ok(Some(value)),
            None => {
                let names: Vec<&str> = all.iter().map(|&value| name(value)).collect();
                Err(shape(
                    &at,
                    &format!("unknown value \"{s}\", expected {}", one_of(&names)),
                ))
            }
        },
        other => Err(expected(&at, "a string", &other)),
    }
}

/// An optional array of strings (none: empty).
fn strings<V: JsValueIn>(value: V, at: &str) -> Result<Vec<String>, Failure<V::Js>> {
    let len = match value.kind()? {
        Kind::Absent => return Ok(Vec::new()),
        Kind::Array(len) => len,
        other => return Err(expected(at, "an array of strings", &other)),
    };
    (0..len)
        .map(|i| match value.at(i)?.kind()? {
            Kind::String(s) => Ok(s),
            other => Err(expected(&format!("{at}[{i}]"), "a string", &other)),
        })
        .collect()
}

/// Refuses a value at `path` that is not an object, or that has a field
/// not in `known`.
fn known_fields<V: JsValueIn>(value: &V, path: &str, known: &[&str]) -> Result<(), Failure<V::Js>> {
    match value.kind()? {
        Kind::Object => {}
        other => return Err(expected(path, "an object", &other)),
    }
    match value
        .keys()?
        .into_iter()
        .find(|k| !known.contains(&k.as_str()))
    {
        Some(unknown) => Err(shape(
            path,
            &format!("unknown field `{unknown}`, expected {}", one_of(known)),
        )),
        None => Ok(()),
    }
}

/// `` `a`, `b` or `c` ``.
fn one_of(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// A value of the wrong shape at `at`.
fn expected<J>(at: &str, what: &str, found: &Kind) -> Failure<J> {
    let found = match found {
        Kind::Absent => "null".to_owned(),
        Kind::Number(_) => "a number".to_owned(),
        Kind::String(s) => format!("the string \"{s}\""),
        Kind::Array(_) => "an array".to_owned(),
        Kind::Object => "an object".to_owned(),
        Kind::Other => "a boolean".to_owned(),
    };
    shape(at, &format!("expected {what}, found {found}"))
}

fn shape<J>(at: &str, message: &str) -> Failure<J> {
    Failure::Config(format!("policy configuration: {at}: {message}"))
}
