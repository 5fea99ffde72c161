//! `ratekeeper.Policy`: several limits decided together, all or nothing,
//! on the core's `Policy`.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple, PyType};
use ratekeeper::{Algorithm, Decision, Error, Nanos, Policy, PolicyDecision};

use smallvec::SmallVec;

use crate::convert::{self, Request};
use crate::decision::{headers_dict, Issuer, LimitDecisions, PyDecision, PyPolicyDecision};
use crate::errors::{rate_limited, to_py, to_py_with};
use crate::keyed::PyKeyedLimiter;
use crate::policy_config::{config_text, from_config};
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
    /// Every mark where memory for a key ran out: a key left out would be
    /// taken as untouched, and a booking of it given back, admitting more.
    fn marks(&self, request: &Request, extent: usize) -> Vec<u8> {
        let mut marks = Vec::new();
        let listed = request.with_fields(|fields| {
            self.policy.each_key(fields, extent, |place, key| {
                marks.push(shared::mark(place, key))
            })
        });
        match listed {
            Ok(()) => marks,
            Err(_) => shared::every_mark(),
        }
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
            ..
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
                    let prototype = limiter.get().configuration(py);
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
                    let listed = policy.each_key(fields, policy.len(), |place, key| {
                        if policy.keyed_by(place).next().is_some() {
                            marks.push(shared::mark(place, key));
                        }
                    });
                    // Out of memory for a key: taken as a reset of every
                    // key (less given back, never more).
                    if listed.is_err() {
                        marks = shared::every_mark();
                    }
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
