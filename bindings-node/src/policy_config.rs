//! A policy's declarative configuration, read from JS data: the core's
//! [`PolicyConfig`] filled in field by field through [`JsValueIn`], as both
//! JS bindings read every other option.
//!
//! The JS layer hands over plain data as `JSON.parse` makes it, each object
//! without a prototype (so that nothing inherited is read): it parses JSON
//! text with the engine's own parser, and sends an object through
//! `JSON.stringify` first (NaN, the infinities and BigInts then arrive as
//! strings, refused here by name). So neither binding ships a JSON parser:
//! in the WebAssembly build, serde_json and serde's readers were a quarter
//! of the download.
//!
//! The fields, their defaults and what `null` means are serde's reading of
//! [`LimitConfig`] (Rust, Python): a missing field takes its default, and
//! `null` is "none" for the optional ones (`burst`, `calendar`, `max_keys`,
//! `eviction`) and a wrong type for the others. Numbers are whole, from 0 to
//! 2^64 - 1 (past 2^53 - 1, a BigInt of the digits written: [`Kind::Whole`]);
//! what serde refuses in JSON text and `JSON.parse` takes (a count written
//! `2.0`, a field given twice) the JS layer refuses. A value of the wrong shape, or a field no limit has, is a
//! [`Failure::Config`] naming its place (`limits[1].burst`); a value of the
//! right shape that the core refuses (a zero burst) is the core's own error.

use ratekeeper::{Algorithm, Calendar, Eviction, LimitConfig, Policy, PolicyConfig};

use crate::shared::{counted_in_js, Failure, JsValueIn, Kind};

/// `new Policy(config)`: `{ limits: [...] }`.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn policy_from_config<V: JsValueIn>(config: &V) -> Result<Policy, Failure<V::Js>> {
    let Some(list) = Object::new(config, "config", &["limits"])?.get("limits")? else {
        return Err(shape("config", "missing field `limits`"));
    };
    let len = match list.kind()? {
        Kind::Array(len) => len,
        other => return Err(expected("limits", "an array", &other)),
    };
    // Not reserved ahead: the length is the caller's, and each element is
    // checked before the next is read.
    let mut limits = Vec::new();
    for i in 0..len {
        let path = format!("limits[{i}]");
        limits.push(limit(&Object::new(
            &list.at(i)?,
            &path,
            LimitConfig::FIELDS,
        )?)?);
    }
    // A value the core refuses (a zero burst) says which limit it is in, in
    // the core's words, whose names are the configuration's (`max_keys`).
    let policy = PolicyConfig::new(limits)
        .policy_or_fault()
        .map_err(|(i, error)| {
            Failure::Worded(error, format!("policy configuration: limits[{i}]: {error}"))
        })?;
    Ok(counted_in_js(policy)?)
}

/// One element of `limits`.
#[cfg_attr(ratekeeper_size, optimize(size))]
fn limit<V: JsValueIn>(o: &Object<'_, V>) -> Result<LimitConfig, Failure<V::Js>> {
    let required = |name: &'static str| match o.kind(name)? {
        Some(Kind::String(s)) => Ok(s),
        None => Err(shape(o.path, &format!("missing field `{name}`"))),
        Some(other) => Err(expected(&o.at(name), "a string", &other)),
    };
    // Every field of `LimitConfig` is read below. It is `#[non_exhaustive]`,
    // so no struct literal lists them all for the compiler to check: a field
    // added to the core fails this build until it is read here too.
    const _: () = assert!(LimitConfig::FIELDS.len() == 8);
    // In the struct's order: the first fault found is the one told.
    let mut config = LimitConfig::default();
    config.name = required("name")?;
    // Not an `Option`: null is a wrong type, as for serde.
    config.algorithm = o
        .named("algorithm", false, Algorithm::ALL, Algorithm::name)?
        .unwrap_or_default();
    config.rate = required("rate")?;
    config.burst = o.whole("burst")?;
    config.calendar = o.named("calendar", true, Calendar::ALL, Calendar::name)?;
    config.by = o.strings("by")?;
    config.max_keys = o.whole("max_keys")?;
    config.eviction = o.named("eviction", true, Eviction::ALL, Eviction::name)?;
    Ok(config)
}

/// An object of the configuration, at `path`, and the fields it has.
struct Object<'a, V> {
    value: &'a V,
    path: &'a str,
    keys: Vec<String>,
}

impl<'a, V: JsValueIn> Object<'a, V> {
    /// `value`, which must be an object whose fields are all in `known`.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn new(value: &'a V, path: &'a str, known: &[&str]) -> Result<Self, Failure<V::Js>> {
        match value.kind()? {
            Kind::Object => {}
            other => return Err(expected(path, "an object", &other)),
        }
        let keys = value.keys()?;
        if let Some(unknown) = keys.iter().find(|k| !known.contains(&k.as_str())) {
            let message = format!("unknown field `{unknown}`, expected {}", one_of(known));
            return Err(shape(path, &message));
        }
        Ok(Object { value, path, keys })
    }

    /// The place of field `name`, for messages.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn at(&self, name: &str) -> String {
        format!("{}.{name}", self.path)
    }

    /// Field `name`; `None` when the object has no such field.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn get(&self, name: &'static str) -> Result<Option<V>, Failure<V::Js>> {
        if self.keys.iter().any(|k| k == name) {
            self.value.get(name).map(Some)
        } else {
            Ok(None)
        }
    }

    /// What field `name` holds (`Kind::Absent`: null); `None` when missing.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn kind(&self, name: &'static str) -> Result<Option<Kind>, Failure<V::Js>> {
        self.get(name)?.as_ref().map(JsValueIn::kind).transpose()
    }

    /// An optional field: missing or null is `None`.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn optional(&self, name: &'static str) -> Result<Option<Kind>, Failure<V::Js>> {
        Ok(self
            .kind(name)?
            .filter(|kind| !matches!(kind, Kind::Absent)))
    }

    /// An optional whole number, from 0 to 2^64 - 1.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn whole(&self, name: &'static str) -> Result<Option<u64>, Failure<V::Js>> {
        match self.optional(name)? {
            None => Ok(None),
            // 2^64 is exact as a float; the cast is exact below it.
            Some(Kind::Number(n))
                if (0.0..18_446_744_073_709_551_616.0).contains(&n) && n.fract() == 0.0 =>
            {
                Ok(Some(n as u64))
            }
            // Digits past 2^53 - 1, exactly (a number would be rounded).
            Some(Kind::Whole(n)) => Ok(Some(n)),
            Some(Kind::Number(_)) => Err(shape(
                &self.at(name),
                "expected a whole number from 0 to 2^64 - 1",
            )),
            Some(other) => Err(expected(&self.at(name), "a number", &other)),
        }
    }

    /// The value of `all` that `field` names, as the core's configuration
    /// spells it (exactly, as serde reads it); `None` when missing, or null
    /// when `null_is_none` (an `Option` field).
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn named<T: Copy>(
        &self,
        field: &'static str,
        null_is_none: bool,
        all: &[T],
        name: fn(T) -> &'static str,
    ) -> Result<Option<T>, Failure<V::Js>> {
        let kind = if null_is_none {
            self.optional(field)?
        } else {
            self.kind(field)?
        };
        match kind {
            None => Ok(None),
            Some(Kind::String(s)) => match all.iter().find(|&&value| name(value) == s) {
                Some(&value) => Ok(Some(value)),
                None => {
                    let names: Vec<&str> = all.iter().map(|&value| name(value)).collect();
                    let message = format!("unknown value \"{s}\", expected {}", one_of(&names));
                    Err(shape(&self.at(field), &message))
                }
            },
            Some(other) => Err(expected(&self.at(field), "a string", &other)),
        }
    }

    /// An array of strings; missing is empty.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn strings(&self, field: &'static str) -> Result<Vec<String>, Failure<V::Js>> {
        let Some(list) = self.get(field)? else {
            return Ok(Vec::new());
        };
        let at = self.at(field);
        let len = match list.kind()? {
            Kind::Array(len) => len,
            other => return Err(expected(&at, "an array of strings", &other)),
        };
        let mut strings = Vec::new();
        for i in 0..len {
            match list.at(i)?.kind()? {
                Kind::String(s) => strings.push(s),
                other => return Err(expected(&format!("{at}[{i}]"), "a string", &other)),
            }
        }
        Ok(strings)
    }
}

/// `` `a`, `b` or `c` ``.
#[cfg_attr(ratekeeper_size, optimize(size))]
fn one_of(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// A value of the wrong shape at `at`.
#[cfg_attr(ratekeeper_size, optimize(size))]
fn expected<J>(at: &str, what: &str, found: &Kind) -> Failure<J> {
    let found = match found {
        Kind::Absent => "null".to_owned(),
        Kind::Number(_) | Kind::Whole(_) => "a number".to_owned(),
        Kind::String(s) => format!("the string \"{s}\""),
        Kind::Array(_) => "an array".to_owned(),
        Kind::Object => "an object".to_owned(),
        Kind::Other => "a boolean".to_owned(),
    };
    shape(at, &format!("expected {what}, found {found}"))
}

#[cfg_attr(ratekeeper_size, optimize(size))]
fn shape<J>(at: &str, message: &str) -> Failure<J> {
    Failure::Config(format!("policy configuration: {at}: {message}"))
}
