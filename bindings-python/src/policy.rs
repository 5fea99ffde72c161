//! `ratekeeper.Policy`: several limits decided together, all or nothing,
//! on the core's `Policy`.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple, PyType};
use ratekeeper::{
    Algorithm, Decision, Error, LimitConfig, Nanos, Policy, PolicyConfig, PolicyDecision,
};
use serde_json::Value;

use smallvec::SmallVec;

use crate::convert::{self, Request};
use crate::decision::{headers_dict, Issuer, LimitDecisions, PyDecision, PyPolicyDecision};
use crate::errors::{invalid_config, rate_limited, to_py, to_py_with};
use crate::keyed::PyKeyedLimiter;
use crate::recycle::Recycler;
use crate::shared::{self, limiter_methods, Core, Settled, Shared, Subject};

/// The core policy, and each limit's window (for the headers).
pub struct PolicyCore {
    policy: Policy,
    windows: Vec<Nanos>,
}

/// A policy's answer to make once the policy is unlocked: the combined
/// decision and each limit's own (inline up to a few limits), copied out
/// of the policy. The usual answer needs no copy: the last PolicyDecision,
/// written again from the policy's own numbers while it is locked
/// (`PyPolicy::settle`).
pub struct PolicyAnswer {
    combined: PolicyDecision,
    limits: SmallVec<[Decision; 4]>,
}

impl PolicyCore {
    fn new(policy: Policy) -> Self {
        let windows = (0..policy.len())
            .map(|i| policy.limiter(i).window())
            .collect();
        PolicyCore { policy, windows }
    }

    /// Drops the keys of every limit back to fresh at `now`.
    fn reclaim(&mut self, now: Nanos) {
        self.policy.reclaim(now);
    }
}

impl Core for PolicyCore {
    type Target = Request;
    type Owned = Request;
    /// The combined decision: each limit's own stays in the policy
    /// (`Policy::decisions`) until `PyPolicy::settle` reads it.
    type Answer = PolicyDecision;

    fn try_acquire(
        &mut self,
        request: &Request,
        now: Nanos,
        cost: u64,
    ) -> Result<PolicyDecision, Error> {
        request.with_fields(|fields| self.policy.try_acquire(fields, now, cost))
    }

    fn peek(&mut self, request: &Request, now: Nanos, cost: u64) -> Result<PolicyDecision, Error> {
        request.with_fields(|fields| self.policy.peek(fields, now, cost))
    }

    fn reserve(
        &mut self,
        request: &Request,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> Result<Result<Nanos, PolicyDecision>, Error> {
        request.with_fields(|fields| self.policy.reserve(fields, now, cost, max_wait))
    }

    fn refund(&mut self, request: &Request, taken_at: Nanos, cost: u64) -> Result<(), Error> {
        request.with_fields(|fields| self.policy.refund(fields, taken_at, cost))
    }

    /// The limits a booking made now is booked in: those the policy has.
    fn extent(&self) -> usize {
        self.policy.len()
    }

    /// Gives a booking back in the limits it was booked in only: a limit
    /// added since never held it (giving it back there would admit more
    /// than that limit allows), nor needs the request to hold its fields.
    fn refund_booking(
        &mut self,
        request: &Request,
        taken_at: Nanos,
        cost: u64,
        extent: usize,
    ) -> Result<(), Error> {
        request.with_fields(|fields| self.policy.refund_limits(fields, taken_at, cost, extent))
    }

    fn explain(&self, error: &Error, request: &Request) -> Option<String> {
        if error.code() != "invalid_value" || error.argument() != Some("request") {
            return None;
        }
        let (limit, field) = request.with_fields(|fields| {
            let (limit, field) = self.policy.missing_field(fields)?;
            Some((limit.to_owned(), field.to_owned()))
        })?;
        Some(format!(
            "`request` lacks the field '{field}' that limit '{limit}' is keyed by"
        ))
    }

    fn gives_back_anywhere(&self) -> bool {
        self.policy.refunds_any_booking()
    }

    /// The request's key in each limit it was booked in (a global limit's
    /// is one for every request): a call touches no other key's state.
    fn marks(&self, request: &Request, extent: usize) -> Vec<u8> {
        let mut marks = Vec::new();
        request.with_fields(|fields| {
            self.policy.each_key(fields, extent, |place, key| {
                marks.push(shared::mark(place, key))
            })
        });
        marks
    }

    /// A policy of one limit that moves up (a GCRA, a leaky bucket) moves
    /// its waiters up as that limiter does, in one queue for all its
    /// requests; one of several limits does not (see `Policy::moves_up`).
    fn moves_up(&self) -> bool {
        self.policy.moves_up()
    }

    fn to_owned(request: &Request) -> Request {
        request.clone()
    }

    fn borrow(owned: &Request) -> &Request {
        owned
    }
}

/// Several limits of any algorithms, each keyed by fields of the request
/// (or global), decided together: all or nothing.
///
/// A request is allowed only if every limit allows it, and then every limit
/// consumes its cost; a denial consumes nothing anywhere. A request is a
/// mapping of field names to values (``{"user": "alice", "route": "/a"}``;
/// values are ``str``, ``bytes`` or ``int``, as keyed limiters' keys are);
/// each limit keeps one limiter per combination of the values of its
/// ``by`` fields, or one for all requests when ``by`` is empty. A request
/// lacking a field a limit is keyed by raises ``RateLimitError``
/// (``invalid_value``, naming ``request``, the field and the limit).
///
/// ``Policy(config)`` takes a configuration: a dict ``{"limits": [{"name":
/// ..., "algorithm": ..., "rate": "10/second", "burst": ..., "by": [...],
/// ...}]}`` or the same as a JSON string, or a rate string such as
/// ``"10/second;100/day"`` (one limit per rate, named by it, built with the
/// ``algorithm`` and keyed by the ``by`` keyword arguments).
/// ``Policy()`` is empty (it allows everything) until ``add`` adds limits
/// made in code. ``clock``: as for limiters; by default ``time.time`` once
/// a limit follows a calendar (UTC days, weeks, months), else
/// ``time.monotonic``.
///
/// Every method takes the request first, then the limiter's arguments, and
/// answers a ``PolicyDecision``; ``headers`` lists every limit it decided;
/// ``reset(request)`` puts the request's keys back to fresh.
/// ``len(policy)``, ``names``, ``keyed_by(name)`` and ``limits``
/// (``PolicyLimit``s) describe its limits. Safe to share between threads.
#[pyclass(frozen, name = "Policy", module = "ratekeeper")]
pub struct PyPolicy {
    shared: Shared<PolicyCore>,
    recycler: Recycler,
}

impl Subject for PyPolicy {
    type Core = PolicyCore;

    fn shared(&self) -> &Shared<PolicyCore> {
        &self.shared
    }

    type Pending = PolicyAnswer;

    /// The last PolicyDecision, written again from the policy's numbers
    /// where they lie, when nothing else holds it; else a copy of them to
    /// make a new one from. (Copied out on every call, the answer was then
    /// moved, 232 bytes by `memcpy` each time, and the copies loaded in 64
    /// bytes what had just been stored field by field, waiting for those
    /// stores: an unkeyed policy's `try_acquire()` took 168 ns, 104-109
    /// without.)
    #[inline(always)]
    fn settle<'py>(
        slf: &Bound<'py, Self>,
        core: &PolicyCore,
        combined: PolicyDecision,
    ) -> Settled<'py, PolicyAnswer> {
        let limits = core.policy.decisions();
        let (decision, denied_by) = (combined.decision, combined.denied_by);
        let recycler = &slf.get().recycler;
        match recycler.reuse_policy(slf.py(), decision, limits, denied_by) {
            Some(last) => Settled::Ready(last),
            None => Settled::Pending(PolicyAnswer {
                combined,
                limits: limits.into(),
            }),
        }
    }

    fn answer<'py>(
        slf: &Bound<'py, Self>,
        answer: PolicyAnswer,
    ) -> PyResult<Bound<'py, PyDecision>> {
        let PolicyDecision {
            decision,
            denied_by,
        } = answer.combined;
        let limits = LimitDecisions::new(&answer.limits, denied_by);
        let issuer = Issuer::Policy {
            policy: slf.clone().unbind(),
            limits,
        };
        let base = PyDecision::new(decision, issuer);
        let init = PyClassInitializer::from(base).add_subclass(PyPolicyDecision);
        let fresh = Bound::new(slf.py(), init)?.into_super();
        Ok(slf.get().recycler.keep(fresh))
    }

    fn recycler(&self) -> &Recycler {
        &self.recycler
    }

    fn rate_limited(&self, py: Python<'_>, denied: &PolicyDecision) -> PyErr {
        let name = match denied.denied_by {
            Some(index) => self.shared.lock(py).policy.name(index).to_owned(),
            None => "policy".to_owned(),
        };
        rate_limited(py, &name, &denied.decision)
    }
}

impl PyPolicy {
    /// `policy`, reading `clock`; by default `time.time` if a limit follows
    /// a calendar (as `with_calendar` does), else `time.monotonic`; its
    /// keys' hashes seeded from the operating system (limits added later too).
    fn with(py: Python<'_>, mut policy: Policy, clock: Option<Py<PyAny>>) -> PyResult<Self> {
        let (seed, bits) = crate::hash_seed::host_seed();
        policy.seed_hashes(seed, bits);
        let calendar = (0..policy.len()).any(|i| policy.limiter(i).calendar().is_some());
        let policy = PyPolicy {
            shared: Shared::new(PolicyCore::new(policy), clock),
            recycler: Recycler::default(),
        };
        if calendar {
            policy.shared.default_clock(convert::wall_clock(py)?);
        }
        Ok(policy)
    }

    /// The name of limit `index`.
    pub fn limit_name(&self, py: Python<'_>, index: usize) -> PyResult<Py<PyString>> {
        // Copied out first: no Python runs while the policy is locked.
        let name = self.shared.lock(py).policy.name(index).to_owned();
        Ok(PyString::new(py, &name).unbind())
    }

    /// The name and window of the first `count` limits (at most all).
    pub fn limits(&self, py: Python<'_>, count: usize) -> Vec<(String, Nanos)> {
        let core = self.shared.lock(py);
        let count = count.min(core.policy.len());
        (0..count)
            .map(|i| (core.policy.name(i).to_owned(), core.windows[i]))
            .collect()
    }

    /// The headers of a combined decision whose limits decided `limits`.
    pub fn headers_of<'py>(
        &self,
        py: Python<'py>,
        limits: &[Decision],
        combined: &Decision,
    ) -> PyResult<Bound<'py, PyDict>> {
        // Zipped: a decision of another policy may list more limits.
        let named = self.limits(py, limits.len());
        let items = named.iter().zip(limits);
        let items = items.map(|((name, window), decision)| (name.as_str(), *window, decision));
        headers_dict(py, items, combined)
    }

    /// The headers of limit `index`'s own `decision`.
    pub fn limit_headers_of<'py>(
        &self,
        py: Python<'py>,
        index: usize,
        decision: &Decision,
    ) -> PyResult<Bound<'py, PyDict>> {
        let (name, window) = &self.limits(py, index + 1)[index];
        headers_dict(py, [(name.as_str(), *window, decision)], decision)
    }

    /// The guarantee of each limit and of all of them (`ratekeeper.guarantee`).
    pub fn guarantees(&self, py: Python<'_>) -> ratekeeper::guarantee::Guarantees {
        self.shared.lock(py).policy.guarantees()
    }

    /// Each limit's name and the fields it is keyed by.
    fn keyed(&self, py: Python<'_>) -> Vec<(String, Vec<String>)> {
        let core = self.shared.lock(py);
        let policy = &core.policy;
        (0..policy.len())
            .map(|i| {
                (
                    policy.name(i).to_owned(),
                    policy.keyed_by(i).map(str::to_owned).collect(),
                )
            })
            .collect()
    }
}

/// A policy from rate strings, one limit per rate.
fn from_rates(
    py: Python<'_>,
    rates: &str,
    algorithm: Algorithm,
    by: &[String],
) -> PyResult<Policy> {
    let by: Vec<&str> = by.iter().map(String::as_str).collect();
    Policy::from_rates(rates, algorithm, &by).map_err(|err| to_py(py, err))
}

/// Whether `text` given to `Policy(text)` is a configuration's JSON rather
/// than rate strings: its first character past whitespace and a byte order
/// mark is `{`. The JS bindings' `new Policy(text)` applies the same test
/// (`configText` in bindings-node/lib/api/policy.cjs), so that one string is
/// read alike in both. Whitespace is what the rate grammar skips (Python's
/// `\s`: U+001C to U+001F too, which `char::is_whitespace` lacks); a BOM,
/// which JS's `trimStart` skips, is skipped too, so that a file saved with
/// one is refused as the JSON it is (`invalid_config`), not as a rate that
/// does not parse.
fn config_text(text: &str) -> bool {
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
/// it, then `serdeReading` in bindings-node/lib/api/values.cjs), and as a
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
/// bindings name it (`serdeReading`, lib/api/values.cjs): the field of the
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
        let mut fields = object(limit, &place, &LimitConfig::FIELDS)?;
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
        read.push(LimitConfig {
            name: field!("name", required),
            algorithm: field!("algorithm"),
            rate: field!("rate", required),
            burst: field!("burst", count),
            calendar: field!("calendar"),
            by: field!("by"),
            max_keys: field!("max_keys", count),
            eviction: field!("eviction"),
        });
    }
    Ok(PolicyConfig { limits: read })
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
fn from_config(config: &Bound<'_, PyAny>) -> PyResult<Policy> {
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

limiter_methods!(
    #[pymethods] PyPolicy, "every limit", [request = None: Option<Request> = convert::request],
    answer = "PolicyDecision",
    try_acquire = ["Take ``cost`` units from every limit if each has them, and say what happened.",
        "", "Returns a PolicyDecision: ``allowed`` (then every limit consumed the",
        "cost), ``denied_by`` (the limit that denied, ``None`` when allowed) and",
        "``limits`` (each limit's own Decision), with the tightest limit's",
        "``remaining`` and ``limit`` and the longest ``retry_after`` and",
        "``reset_after``. A denial consumes nothing anywhere and is not an",
        "exception. A ``cost`` above a limit's ``limit`` raises ``RateLimitError``",
        "(code ``cost_exceeds_limit``), since it could never be allowed."],
    reserve = "($self, /, request=None, cost=1, *, max_wait=None, now=None)",
    reclaim = "Drop the keys of every limit that are back to fresh at ``now`` (default: the clock's reading). Answers do not change." {
        #[new]
        #[pyo3(signature = (config = None, *, algorithm = None, by = None, clock = None))]
        fn new(
            py: Python<'_>,
            config: Option<&Bound<'_, PyAny>>,
            algorithm: Option<&Bound<'_, PyAny>>,
            by: Option<&Bound<'_, PyAny>>,
            #[pyo3(from_py_with = convert::clock)] clock: Option<Py<PyAny>>,
        ) -> PyResult<Self> {
            let rates = config
                .and_then(|config| config.cast::<PyString>().ok())
                .map(|text| convert::text(text, "config").map(str::to_owned))
                .transpose()?
                // Whole, so that a syntax error names its place in the text given.
                .filter(|text| !config_text(text));
            let policy = match (config, rates) {
                (_, Some(rates)) => {
                    let algorithm = algorithm.map_or(Ok(Algorithm::TokenBucket), convert::algorithm)?;
                    let by = by.map_or(Ok(Vec::new()), convert::fields)?;
                    from_rates(py, &rates, algorithm, &by)?
                }
                (config, None) if algorithm.is_some() || by.is_some() => {
                    let name = if algorithm.is_some() { "algorithm" } else { "by" };
                    let reason = match config {
                        Some(_) => "applies only to a rate string; a configuration names each limit's",
                        None => "applies only to a rate string, and none was given",
                    };
                    return Err(to_py(py, Error::InvalidValue { name, reason }));
                }
                (Some(config), None) => from_config(config)?,
                (None, None) => Policy::new(),
            };
            PyPolicy::with(py, policy, clock)
        }

        /// A policy of one limit per rate of ``rates`` (``"10/second;100/day"``,
        /// the syntax of the ``limits`` library), each named by its rate, built
        /// with ``algorithm`` and keyed by the fields ``by``.
        #[staticmethod]
        #[pyo3(signature = (rates, *, algorithm = None, by = None, clock = None),
               text_signature = "(rates, *, algorithm='token_bucket', by=(), clock=None)")]
        fn from_rates(
            py: Python<'_>,
            rates: &Bound<'_, PyAny>,
            algorithm: Option<&Bound<'_, PyAny>>,
            by: Option<&Bound<'_, PyAny>>,
            #[pyo3(from_py_with = convert::clock)] clock: Option<Py<PyAny>>,
        ) -> PyResult<Self> {
            let algorithm = algorithm.map_or(Ok(Algorithm::TokenBucket), convert::algorithm)?;
            let by = by.map_or(Ok(Vec::new()), convert::fields)?;
            let policy = from_rates(py, convert::string(rates, "rates")?, algorithm, &by)?;
            PyPolicy::with(py, policy, clock)
        }

        /// A policy from a configuration: a dict ``{"limits": [...]}`` or the
        /// same as a JSON string. Each limit has a ``name``, an ``algorithm``
        /// (default ``"token_bucket"``), a ``rate`` (``"10/second"``), and
        /// optionally ``burst``, ``calendar`` (``"day"``, ``"week"`` or
        /// ``"month"``, for window algorithms), ``by`` (fields), ``max_keys``
        /// and ``eviction``. An unknown or malformed field raises
        /// ``RateLimitError`` (code ``invalid_config``) naming it.
        #[staticmethod]
        #[pyo3(signature = (config, *, clock = None))]
        fn from_config(
            config: &Bound<'_, PyAny>,
            #[pyo3(from_py_with = convert::clock)] clock: Option<Py<PyAny>>,
        ) -> PyResult<Self> {
            PyPolicy::with(config.py(), from_config(config)?, clock)
        }

        /// Add a limit called ``name``, keyed by the request fields ``by`` (none:
        /// one limiter for every request), each key starting as a fresh copy of
        /// ``limiter``.
        ///
        /// ``limiter`` is a ratekeeper limiter (its configuration only), or a
        /// ``KeyedLimiter`` (its configuration and ``max_keys`` bound, not its
        /// keys). A name already taken raises ``RateLimitError``
        /// (``invalid_value``), as does a calendar limit added to a policy
        /// without a clock of its own that holds state on ``time.monotonic``
        /// (pass ``clock=time.time``).
        #[pyo3(signature = (name, limiter, *, by = None))]
        fn add(
            &self,
            py: Python<'_>,
            name: &Bound<'_, PyAny>,
            limiter: &Bound<'_, PyAny>,
            by: Option<&Bound<'_, PyAny>>,
        ) -> PyResult<()> {
            let by = by.map_or(Ok(Vec::new()), convert::fields)?;
            let by: Vec<&str> = by.iter().map(String::as_str).collect();
            let name = convert::string(name, "name")?;
            let (store, window) = match limiter.cast::<PyKeyedLimiter>() {
                Ok(keyed) => (keyed.get().empty_store(py)?, keyed.get().window_nanos()),
                Err(_) => {
                    let Ok(limiter) = limiter.cast::<crate::limiter::PyLimiter>() else {
                        // Both kinds named, as JS's `add` names them.
                        let expected = "a ratekeeper limiter (TokenBucket, Gcra, LeakyBucket, \
                                        ...) or a KeyedLimiter";
                        return Err(to_py(py, Error::InvalidType { name: "limiter", expected }));
                    };
                    let prototype = limiter.get().snapshot(py);
                    let window = prototype.window();
                    (ratekeeper::AnyKeyed::new(prototype), window)
                }
            };
            // A policy without a clock of its own reads `time.monotonic` until
            // a calendar limit moves it to `time.time`, as the limiter's
            // `with_calendar` reads it (see `Policy::add_store_on`).
            let monotonic = self.shared.clock().is_none();
            let added = {
                let mut core = self.shared.lock(py);
                let added = core.policy.add_store_on(name, &by, store, monotonic);
                if added.is_ok() {
                    core.windows.push(window);
                }
                added
            };
            let calendar = added.map_err(|err| match err.argument() {
                // The core's words, in this binding's clocks.
                Some("limiter") => {
                    let message = "`limiter` follows a calendar, which needs time.time, and the \
                                   policy has decided on time.monotonic: give it clock=time.time";
                    to_py_with(py, err, message.into())
                }
                _ => to_py(py, err),
            })?;
            if calendar {
                self.shared.default_clock(convert::wall_clock(py)?);
            }
            Ok(())
        }

        /// The HTTP RateLimit header values of a PolicyDecision, as a dict:
        /// ``RateLimit-Policy`` and ``RateLimit`` list every limit the
        /// decision lists (those the policy had when it decided), as
        /// comma-separated items (``"per-user";q=10;w=1, "global";q=100;w=60``),
        /// and ``Retry-After`` (whole seconds, rounded up) is the combined wait
        /// when denied. A policy without limits has none but ``Retry-After``.
        fn headers<'py>(
            &self,
            py: Python<'py>,
            decision: &Bound<'py, PyAny>,
        ) -> PyResult<Bound<'py, PyDict>> {
            let decision = decision.cast::<PyPolicyDecision>().map_err(|_| {
                to_py(py, Error::InvalidType { name: "decision", expected: "a PolicyDecision" })
            })?;
            let decision = decision.borrow();
            let base = decision.as_super();
            match &base.issuer {
                Issuer::Policy { limits, .. } => {
                    self.headers_of(py, limits.limits(), &base.decision())
                }
                Issuer::GivenPolicy { limits, .. } => {
                    let limits: Vec<_> = limits.iter().map(|(_, _, d)| *d).collect();
                    self.headers_of(py, &limits, &base.decision())
                }
                // A Decision whose `__class__` was assigned: no policy's.
                _ => {
                    let expected = "a PolicyDecision";
                    Err(to_py(py, Error::InvalidType { name: "decision", expected }))
                }
            }
        }

        /// Put ``request``'s key back to fresh, as a key never seen, in every
        /// limit keyed by fields that ``request`` all gives; returns how many
        /// of those limits held it (``KeyedLimiter.reset`` in each).
        ///
        /// A global limit is never reset: it counts every request, and no
        /// part of it is this request's. Nor is a limit keyed by a field
        /// ``request`` lacks: ``{"user": "alice"}`` resets the limits by user
        /// and keeps those by IP (a login limit cleared once its user signed
        /// in, while an IP that tried many users stays limited), and the
        /// request given to ``try_acquire`` resets every keyed limit it was
        /// counted in. A request that would reset no limit (a misspelt field,
        /// say) raises ``RateLimitError`` (``invalid_value``). As after
        /// ``KeyedLimiter.reset``, a booking of a key it reset made before it
        /// gives nothing back when cancelled, and waiters of such a key behind
        /// a cancelled one stay where they were (unless no limit held the key:
        /// then nothing changed); bookings of other keys are given back as
        /// before.
        #[pyo3(signature = (request))]
        fn reset(
            &self,
            py: Python<'_>,
            #[pyo3(from_py_with = convert::request)] request: Option<Request>,
        ) -> PyResult<usize> {
            let request = request.unwrap_or_default();
            let held = request.with_fields(|fields| {
                let mut core = self.shared.lock(py);
                let held = core.policy.reset(fields)?;
                // Its bookings may be gone: as a reconfigure, for the
                // waiters of its keys, and none made before gives anything
                // back (see Shared::forgot); other keys' do. No limit held
                // the key: nothing changed.
                if held > 0 {
                    // The keys reset: those of the limits keyed by fields the
                    // request all gives (a global limit is never reset).
                    let mut marks = Vec::new();
                    let policy = &core.policy;
                    policy.each_key(fields, policy.len(), |place, key| {
                        if policy.keyed_by(place).next().is_some() {
                            marks.push(shared::mark(place, key));
                        }
                    });
                    self.shared.forgot(&marks);
                }
                Ok(held)
            });
            held.map_err(|err| to_py(py, err))
        }

        /// The number of limits.
        fn __len__(&self, py: Python<'_>) -> usize {
            self.shared.lock(py).policy.len()
        }

        /// The limits' names, in order.
        #[getter]
        fn names<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
            PyTuple::new(py, self.keyed(py).into_iter().map(|(name, _)| name))
        }

        /// The limits, in order, each a ``PolicyLimit``: a named tuple of its
        /// ``name`` and the fields it is keyed by (``by``, a tuple, empty for a
        /// global limit), as JS's ``policy.limits`` lists ``{ name, by }``.
        #[getter(limits)]
        fn limit_tuples<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
            static POLICY_LIMIT: PyOnceLock<Py<PyType>> = PyOnceLock::new();
            let class = POLICY_LIMIT.import(py, "ratekeeper._policy", "PolicyLimit")?;
            let limits = self
                .keyed(py)
                .into_iter()
                .map(|(name, by)| class.call1((name, PyTuple::new(py, by)?)))
                .collect::<PyResult<Vec<_>>>()?;
            PyTuple::new(py, limits)
        }

        /// The fields limit ``name`` is keyed by, as a tuple (empty for a
        /// global limit); ``RateLimitError`` (``invalid_value``) for a name
        /// no limit has.
        fn keyed_by<'py>(
            &self,
            py: Python<'py>,
            name: &Bound<'py, PyAny>,
        ) -> PyResult<Bound<'py, PyTuple>> {
            let name = convert::string(name, "name")?;
            match self.keyed(py).into_iter().find(|(limit, _)| limit == name) {
                Some((_, by)) => PyTuple::new(py, by),
                // A bad argument, as JS's keyedBy throws it (a RangeError
                // `invalid_value`), in its words, the name as repr shows it.
                None => {
                    let reason = "is not the name of a limit in this policy";
                    let shown = PyString::new(py, name).repr()?;
                    let message = format!("`name` {reason}: {shown}");
                    Err(to_py_with(py, Error::InvalidValue { name: "name", reason }, message))
                }
            }
        }

        /// The one limit's limiter, fresh, named by the limit, on the default
        /// clock; ``None`` unless the policy has a single global limit. What
        /// ``ratekeeper.limit`` waits on for one rate, named by the rate.
        fn _single<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
            let (prototype, name) = {
                let core = self.shared.lock(py);
                let policy = &core.policy;
                if policy.len() != 1 || policy.keyed_by(0).next().is_some() {
                    return Ok(None);
                }
                (policy.limiter(0), policy.name(0).to_owned())
            };
            let call = crate::algorithms::constructor(py, &prototype)?;
            call.kwargs.set_item(intern!(py, "name"), name)?;
            call.factory()?.call(&call.args, Some(&call.kwargs)).map(Some)
        }

        fn __repr__(&self, py: Python<'_>) -> String {
            let limits: Vec<String> = self
                .keyed(py)
                .iter()
                .map(|(name, by)| format!("{name:?} by {by:?}"))
                .collect();
            format!("<Policy: {}>", limits.join("; "))
        }
    }
);
