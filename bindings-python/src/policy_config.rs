//! A `Policy`'s configuration read from JSON text or a mapping, each error
//! naming its place, as the JS bindings' reader names it (`configText` and
//! `serdeReading` in bindings-node/lib/api).

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use ratekeeper::{Error, LimitConfig, Policy, PolicyConfig};
use serde_json::Value;

use crate::convert;
use crate::errors::{invalid_config, to_py, to_py_with};

/// Whether `text` given to `Policy(text)` is a configuration's JSON rather
/// than rate strings: its first character past whitespace and a byte order
/// mark is `{`. The JS bindings' `new Policy(text)` applies the same test
/// (`configText` in bindings-node/lib/api/policy.cjs), so that one string is
/// read alike in both. Whitespace is what the rate grammar skips (Python's
/// `\s`: U+001C to U+001F too, which `char::is_whitespace` lacks); a BOM,
/// which JS's `trimStart` skips, is skipped too, so that a file saved with
/// one is refused as the JSON it is (`invalid_config`), not as a rate that
/// does not parse.
pub fn config_text(text: &str) -> bool {
    text.trim_start_matches(|c: char| {
        c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c) || c == '\u{feff}'
    })
    .starts_with('{')
}

/// A policy from a JSON configuration (`{"limits": [...]}`).
fn from_json(py: Python<'_>, json: &str) -> PyResult<Policy> {
    let fail = |message: String| invalid_config(py, message, false);
    let config = match serde_json::from_str::<PolicyConfig>(json) {
        Ok(config) => config,
        // Read again field by field, for the place of the error; what only
        // serde's own reading refuses (a field given twice in JSON text,
        // which a mapping cannot hold) is said in its words.
        Err(strict) => {
            let value: Value = serde_json::from_str(json).map_err(|err| unparsed(py, json, err))?;
            return Err(fail(match policy_config(value, json) {
                Err(placed) => format!("`config` {placed}"),
                Ok(_) => format!("`config` {strict}"),
            }));
        }
    };
    // A value the core refuses (a zero burst) says which limit it is in.
    config
        .policy_or_fault()
        .map_err(|(i, err)| to_py_with(py, err, format!("`config` limits[{i}]: {err}")))
}

/// The error for `json`, which serde_json did not parse (`err`): not JSON,
/// but for a string holding a lone surrogate escape (`"\ud800"`, which
/// serde_json refuses and JSON's own grammar takes) in text that is JSON
/// otherwise. That is refused as the JS bindings refuse it (JSON.parse reads
/// it, then `serdeReading` in bindings-node/lib/api/config.cjs), and as a
/// limit's name given to `Policy.add` is: `invalid_value`, naming the field
/// of the limit it is in (`rate`), else `config`. A mapping reaches this
/// too: `json.dumps` escapes its lone surrogates.
fn unparsed(py: Python<'_>, json: &str, err: serde_json::Error) -> PyErr {
    let (escapes, field) = lone_surrogates(json);
    let not_json = |err| invalid_config(py, format!("`config` is not valid JSON: {err}"), false);
    let Some(field) = field else {
        return not_json(err);
    };
    // Each escape as U+FFFD, of the same length: any other error is placed
    // as in the text given.
    let mut replaced = json.to_owned();
    for at in escapes {
        replaced.replace_range(at..at + 6, "\\ufffd");
    }
    if let Err(err) = serde_json::from_str::<Value>(&replaced) {
        return not_json(err);
    }
    let reason = "must be valid Unicode text (no lone surrogates)";
    let message = format!("`{field}` {reason}");
    to_py_with(
        py,
        Error::InvalidValue {
            name: "config",
            reason,
        },
        message,
    )
}

/// Where the strings of `json` (keys too) hold a lone surrogate escape: the
/// byte offset of each, and the field of the first, named as the JS
/// bindings name it (`serdeReading`, lib/api/config.cjs): the field of the
/// limit whose value it is in, else `config` (a key of a limit, or anywhere
/// outside the limits). Read as JSON, which the caller checks `json` is.
fn lone_surrogates(json: &str) -> (Vec<usize>, Option<String>) {
    /// What a container is: the configuration, its `limits`, one of those,
    /// (inside) the value of a limit's field, or anything else.
    #[derive(Clone, Copy, PartialEq)]
    enum Role {
        Top,
        Limits,
        Limit,
        Within,
        Other,
    }
    /// An array or object open at this point of the text: its role, its
    /// current key (an object's), and the limit's field it is in.
    struct Open {
        role: Role,
        array: bool,
        key: Option<String>,
        field: Option<String>,
    }
    let bytes = json.as_bytes();
    let mut open: Vec<Open> = Vec::new();
    let mut escapes = Vec::new();
    let mut first = None;
    let mut in_key = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let start = i;
                let found = escapes.len();
                i = string_end(bytes, i, &mut escapes);
                let at = open.last();
                if first.is_none() && escapes.len() > found {
                    first = Some(match at {
                        Some(o) if o.role == Role::Within => o.field.clone(),
                        Some(o) if o.role == Role::Limit && !in_key => o.key.clone(),
                        _ => None,
                    });
                }
                if in_key {
                    if let Some(o) = open.last_mut() {
                        o.key = serde_json::from_str(json.get(start..i).unwrap_or("")).ok();
                    }
                }
            }
            open_at @ (b'{' | b'[') => {
                let array = open_at == b'[';
                let parent = open.last();
                let role = match parent.map(|p| (p.role, p.key.as_deref())) {
                    None if array => Role::Other,
                    None => Role::Top,
                    Some((Role::Top, Some("limits"))) if array => Role::Limits,
                    Some((Role::Limits, _)) if !array => Role::Limit,
                    Some((Role::Limit | Role::Within, _)) => Role::Within,
                    _ => Role::Other,
                };
                let field = parent.and_then(|p| match p.role {
                    Role::Limit => p.key.clone(),
                    Role::Within => p.field.clone(),
                    _ => None,
                });
                open.push(Open {
                    role,
                    array,
                    key: None,
                    field,
                });
                in_key = !array;
                i += 1;
            }
            b'}' | b']' => {
                open.pop();
                i += 1;
            }
            b':' => {
                in_key = false;
                i += 1;
            }
            b',' => {
                in_key = open.last().is_some_and(|o| !o.array);
                i += 1;
            }
            _ => i += 1,
        }
    }
    let field = first.map(|field| field.unwrap_or_else(|| "config".to_owned()));
    (escapes, field)
}

/// The end (past its closing quote) of the JSON string starting at `bytes[start]`,
/// adding the offset of each lone surrogate escape in it to `escapes`.
fn string_end(bytes: &[u8], start: usize, escapes: &mut Vec<usize>) -> usize {
    let unit = |at: usize| {
        bytes
            .get(at + 2..at + 6)
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u16::from_str_radix(hex, 16).ok())
    };
    // A lead surrogate's escape not yet followed by its trail.
    let mut lead: Option<usize> = None;
    let mut i = start + 1;
    while i < bytes.len() && bytes[i] != b'"' {
        let code = if bytes[i] == b'\\' && bytes.get(i + 1) == Some(&b'u') {
            unit(i)
        } else {
            None
        };
        match code {
            Some(0xd800..=0xdbff) => {
                escapes.extend(lead.replace(i));
            }
            Some(0xdc00..=0xdfff) if lead.take().is_some() => {}
            Some(0xdc00..=0xdfff) => escapes.push(i),
            _ => escapes.extend(lead.take()),
        }
        i += match (bytes[i], code) {
            (_, Some(_)) => 6,
            (b'\\', None) => 2,
            _ => 1,
        };
    }
    escapes.extend(lead);
    i + 1
}

/// The configuration `value` holds, read field by field, so that an error
/// names its place (`limits[0].burst: invalid type: ...`), as the JS
/// bindings' reader does, rather than a line and column of JSON text the
/// caller may never have written (a mapping is dumped to JSON first). The
/// fields, their defaults and what `null` means are serde's reading of
/// `LimitConfig`: each field is deserialized on its own. `json` is the
/// text `value` was read from.
fn policy_config(value: Value, json: &str) -> Result<PolicyConfig, String> {
    // Every field of `LimitConfig` is read below. It is `#[non_exhaustive]`,
    // so no struct literal lists them all for the compiler to check: a field
    // added to the core fails this build until it is read here too.
    const _: () = assert!(LimitConfig::FIELDS.len() == 8);
    // The top level unplaced: the error says "`config` " first.
    let mut top = object(value, "", &["limits"])?;
    let limits = match top.remove("limits") {
        Some(Value::Array(limits)) => limits,
        Some(other) => {
            return Err(format!(
                "limits: invalid type: {}, expected an array",
                kind(&other)
            ))
        }
        None => return Err("missing field `limits`".into()),
    };
    let mut read = Vec::new();
    for (i, limit) in limits.into_iter().enumerate() {
        let place = format!("limits[{i}]");
        let mut fields = object(limit, &place, LimitConfig::FIELDS)?;
        // A field left out takes its default (`required` for those without one).
        macro_rules! field {
            ($name:literal) => {
                match fields.remove($name) {
                    Some(value) => serde_json::from_value(value)
                        .map_err(|err| format!("{place}.{}: {err}", $name))?,
                    None => Default::default(),
                }
            };
            ($name:literal, required) => {
                match fields.remove($name) {
                    Some(value) => serde_json::from_value(value)
                        .map_err(|err| format!("{place}.{}: {err}", $name))?,
                    None => return Err(format!("{place}: missing field `{}`", $name)),
                }
            };
            ($name:literal, count) => {
                match fields.remove($name) {
                    Some(value) => count(value, json, i, $name)
                        .map_err(|err| format!("{place}.{}: {err}", $name))?,
                    None => None,
                }
            };
        }
        // In the struct's order: the first fault found is the one told.
        let mut config = LimitConfig::default();
        config.name = field!("name", required);
        config.algorithm = field!("algorithm");
        config.rate = field!("rate", required);
        config.burst = field!("burst", count);
        config.calendar = field!("calendar");
        config.by = field!("by");
        config.max_keys = field!("max_keys", count);
        config.eviction = field!("eviction");
        read.push(config);
    }
    Ok(PolicyConfig::new(read))
}

/// A count field (`burst`, `max_keys`) of limit `i`, as serde reads it,
/// but for an int out of range, said as every count's is ("must not be
/// negative", "must be at most 2^64 - 1"): serde_json reads an integer
/// beyond 64 bits as a float, which serde then called a float of the wrong
/// type, and a mapping's ints reach it so (dumped to JSON).
fn count(value: Value, json: &str, i: usize, name: &str) -> Result<Option<u64>, String> {
    if let Value::Number(n) = &value {
        // A float 0 is JSON's `-0`, which serde_json reads as a float: not
        // negative, nor out of range.
        let beyond = n.is_f64() && n.as_f64() != Some(0.0) && written_as_integer(json, i, name);
        if (n.is_i64() && !n.is_u64()) || beyond {
            let negative = n.as_f64().is_some_and(|v| v < 0.0);
            let reason = if negative {
                "must not be negative"
            } else {
                "must be at most 2^64 - 1"
            };
            return Err(reason.into());
        }
    }
    serde_json::from_value(value).map_err(|err| err.to_string())
}

/// Whether field `name` of limit `i` is written in `json` as an integer
/// (digits, not a fraction or an exponent): what a float read from it
/// cannot say. Read again only on this error's path.
fn written_as_integer(json: &str, i: usize, name: &str) -> bool {
    use serde_json::value::RawValue;
    use std::collections::HashMap;
    // As `Value` reads them: of a key given twice, the last.
    let text = || -> Option<&str> {
        let top: HashMap<String, &RawValue> = serde_json::from_str(json).ok()?;
        let limits: Vec<&RawValue> = serde_json::from_str(top.get("limits")?.get()).ok()?;
        let limit: HashMap<String, &RawValue> = serde_json::from_str(limits.get(i)?.get()).ok()?;
        Some(limit.get(name)?.get())
    };
    text().is_some_and(|text| {
        let digits = text.strip_prefix('-').unwrap_or(text);
        !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
    })
}

/// The fields of `value`, an object at `place` (empty: the top level)
/// whose fields are among `known`.
fn object(
    value: Value,
    place: &str,
    known: &[&str],
) -> Result<serde_json::Map<String, Value>, String> {
    let at = if place.is_empty() {
        String::new()
    } else {
        format!("{place}: ")
    };
    let Value::Object(fields) = value else {
        return Err(format!(
            "{at}invalid type: {}, expected an object",
            kind(&value)
        ));
    };
    match fields.keys().find(|key| !known.contains(&key.as_str())) {
        Some(unknown) => {
            // As the JS bindings say it: "expected `a`, `b` or `c`".
            let quoted: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
            let expected = match quoted.split_last() {
                Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
                _ => quoted.concat(),
            };
            Err(format!(
                "{at}unknown field `{unknown}`, expected {expected}"
            ))
        }
        None => Ok(fields),
    }
}

/// A JSON value's kind, as serde names it in its errors.
fn kind(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean `{b}`"),
        Value::Number(n) => format!("number `{n}`"),
        Value::String(s) => format!("string {s:?}"),
        Value::Array(_) => "sequence".into(),
        Value::Object(_) => "map".into(),
    }
}

/// A policy from a configuration: a mapping (dumped to JSON) or a JSON string.
pub fn from_config(config: &Bound<'_, PyAny>) -> PyResult<Policy> {
    let py = config.py();
    if let Ok(text) = config.cast::<PyString>() {
        return from_json(py, convert::text(text, "config")?);
    }
    if config.cast::<pyo3::types::PyMapping>().is_err() {
        let expected = "a mapping or a JSON string";
        return Err(to_py(
            py,
            Error::InvalidType {
                name: "config",
                expected,
            },
        ));
    }
    let json = py.import(intern!(py, "json"))?;
    // NaN and the infinities refused here, by name: dumped as `NaN`, they
    // made text that is not JSON.
    let strict = PyDict::new(py);
    strict.set_item(intern!(py, "allow_nan"), false)?;
    let text = json
        .call_method(intern!(py, "dumps"), (config,), Some(&strict))
        .map_err(|err| {
            // A value of a type JSON cannot hold (TypeError), or a float it cannot (ValueError).
            let wrong_type = err.is_instance_of::<pyo3::exceptions::PyTypeError>(py);
            invalid_config(
                py,
                format!("`config` is not JSON: {}", err.value(py)),
                wrong_type,
            )
        })?;
    from_json(py, &text.cast::<PyString>()?.to_cow()?)
}
