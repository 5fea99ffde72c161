//! The answers: `ratekeeper.Decision` (one request), `ratekeeper.PolicyDecision`
//! (one request against a policy) and `ratekeeper.Reservation` (one
//! booking), and the RateLimit header values they carry.

use std::cell::UnsafeCell;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple, PyType};
use pyo3::{PyTraverseError, PyVisit};
use ratekeeper::{Decision, Headers, Nanos};

use crate::convert::{self, float_repr};
use crate::errors::cannot_pickle;
use crate::pickle;
use crate::policy::PyPolicy;

/// Who made a decision, for its `headers()`.
pub enum Issuer {
    /// A limiter's or a keyed store's: its name, with the window the
    /// decision keeps beside its numbers.
    Named(Py<PyString>),
    /// A policy's combined decision, with each limit's own and the index of
    /// the limit that denied.
    Policy {
        policy: Py<PyPolicy>,
        limits: LimitDecisions,
    },
    /// One limit's own decision within a policy's.
    PolicyLimit(Py<PyPolicy>, usize),
    /// A decision built from Python (a store's answer, such as Redis's) or
    /// unpickled: the limits it lists in its headers, as (name, window,
    /// decision).
    Given(Box<[(String, Nanos, Decision)]>),
    /// An unpickled policy's decision: each limit's (name, window, own
    /// decision), and the index of the limit that denied.
    GivenPolicy {
        limits: Box<[(String, Nanos, Decision)]>,
        denied_by: Option<usize>,
    },
}

impl Issuer {
    /// Visits the Python objects this refers to, for the garbage collector
    /// (see `Recycler::traverse`).
    fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        match self {
            Issuer::Named(name) => visit.call(name),
            Issuer::Policy { policy, .. } | Issuer::PolicyLimit(policy, _) => visit.call(policy),
            Issuer::Given(_) | Issuer::GivenPolicy { .. } => Ok(()),
        }
    }
}

/// A policy decision's own decision of each limit and the index of the
/// limit that denied: written again, as the numbers are, when the policy
/// answers the same object again (`Recycler::reuse_policy`).
pub struct LimitDecisions(UnsafeCell<(Box<[Decision]>, Option<usize>)>);

impl LimitDecisions {
    pub fn new(limits: &[Decision], denied_by: Option<usize>) -> Self {
        LimitDecisions(UnsafeCell::new((limits.into(), denied_by)))
    }

    /// Each limit's own decision.
    pub fn limits(&self) -> &[Decision] {
        // SAFETY: written only by `rewrite`, whose caller guarantees that
        // nothing else refers to the object, so nothing borrows this.
        unsafe { &(*self.0.get()).0 }
    }

    /// The index of the limit that denied.
    pub fn denied_by(&self) -> Option<usize> {
        // SAFETY: as in `limits`.
        unsafe { (*self.0.get()).1 }
    }

    /// Makes these the decisions `limits`, denied by `denied_by`, when
    /// there are as many; `false` (and nothing written) otherwise.
    ///
    /// # Safety
    /// As [`PyDecision::rewrite`]: nothing but the caller refers to the
    /// decision holding these, and the GIL is held.
    #[inline]
    pub unsafe fn rewrite(&self, limits: &[Decision], denied_by: Option<usize>) -> bool {
        let (old, old_denied_by) = &mut *self.0.get();
        if old.len() != limits.len() {
            return false;
        }
        // One field at a time: the policy stored them so (see `settled`).
        for (old, new) in old.iter_mut().zip(limits) {
            *old = read_settled(new);
        }
        *old_denied_by = denied_by;
        true
    }
}

/// `answer` as the core wrote it, read one field at a time.
///
/// The core returns a decision through memory, each field stored on its
/// own (8 bytes; 1 for `allowed`). The compiler's copy of the whole reads
/// it back 16 bytes at a time, and a load spanning two stores waits for
/// both to reach the cache (a failed store forwarding, some 15 cycles).
/// Field-sized loads are forwarded at once. With the same care in
/// `Recycler::answer` and `PyDecision::rewrite`, a `try_acquire()` went
/// from 58 to 53 ns.
#[inline(always)]
pub fn settled(answer: Result<Decision, ratekeeper::Error>) -> Result<Decision, ratekeeper::Error> {
    Ok(read_settled(&answer?))
}

/// `d`, read one field at a time (see [`settled`]).
#[inline(always)]
fn read_settled(d: &Decision) -> Decision {
    // SAFETY: each is a valid, aligned reference to a field of `d`.
    unsafe {
        Decision {
            allowed: std::ptr::read_volatile(&d.allowed),
            remaining: std::ptr::read_volatile(&d.remaining),
            limit: std::ptr::read_volatile(&d.limit),
            retry_after: std::ptr::read_volatile(&d.retry_after),
            reset_after: std::ptr::read_volatile(&d.reset_after),
        }
    }
}

/// The RateLimit header values of `items` (name, window, decision), as a
/// dict: one comma-separated item per limit in `RateLimit-Policy` and
/// `RateLimit` (none when there is no limit), and `Retry-After` when
/// `combined` is a denial.
pub fn headers_dict<'py, 'a>(
    py: Python<'py>,
    items: impl IntoIterator<Item = (&'a str, Nanos, &'a Decision)>,
    combined: &Decision,
) -> PyResult<Bound<'py, PyDict>> {
    let (mut policy, mut rate_limit) = (String::new(), String::new());
    for (name, window, decision) in items {
        let separator = if policy.is_empty() { "" } else { ", " };
        let values = Headers::new(name, window, decision);
        policy += &format!("{separator}{}", values.policy());
        rate_limit += &format!("{separator}{}", values.rate_limit());
    }
    let dict = PyDict::new(py);
    if !policy.is_empty() {
        dict.set_item(intern!(py, "RateLimit-Policy"), policy)?;
        dict.set_item(intern!(py, "RateLimit"), rate_limit)?;
    }
    if let Some(seconds) = Headers::new("", Nanos::ZERO, combined).retry_after() {
        dict.set_item(intern!(py, "Retry-After"), seconds.to_string())?;
    }
    Ok(dict)
}

/// The RateLimit header values of `decision` by one limit called `name`
/// (a limiter's or a keyed store's).
pub fn named_headers<'py>(
    py: Python<'py>,
    name: &Py<PyString>,
    window: Nanos,
    decision: &Decision,
) -> PyResult<Bound<'py, PyDict>> {
    let name = name.bind(py).to_cow()?;
    headers_dict(py, [(&*name, window, decision)], decision)
}

/// The outcome of one request.
///
/// ``bool(decision)`` is ``decision.allowed``. A denial is a value, not an
/// exception: ``retry_after`` says how long to wait before the same request
/// would be allowed. ``headers()`` gives the HTTP RateLimit header values.
/// Two decisions are equal when their five numbers are. A decision pickles
/// (and copies) as data: its numbers, to the nanosecond, and its headers.
#[pyclass(frozen, eq, hash, subclass, name = "Decision", module = "ratekeeper")]
pub struct PyDecision {
    /// The numbers, the window a `Named` issuer's headers give, and the
    /// float `now` the caller gave (NaN: none); written again only by
    /// `rewrite` and `count_from`.
    numbers: UnsafeCell<(Decision, Nanos, f64)>,
    /// Who decided, for `headers()`.
    pub issuer: Issuer,
}

// SAFETY: `numbers` changes only in `rewrite` and `count_from`, whose
// callers guarantee that nothing else reads the object meanwhile.
unsafe impl Sync for PyDecision {}

impl PyDecision {
    pub fn new(decision: Decision, issuer: Issuer) -> Self {
        Self::with_window(decision, Nanos::ZERO, issuer)
    }

    /// A decision whose headers, for a `Named` issuer, give `window`.
    pub fn with_window(decision: Decision, window: Nanos, issuer: Issuer) -> Self {
        let numbers = UnsafeCell::new((decision, window, f64::NAN));
        PyDecision { numbers, issuer }
    }

    /// An unpickled decision, counting its waits from `now` (NaN: none) as
    /// the pickled one did.
    pub fn restored(decision: Decision, now: f64, issuer: Issuer) -> Self {
        let numbers = UnsafeCell::new((decision, Nanos::ZERO, now));
        PyDecision { numbers, issuer }
    }

    /// A decision of another issuer with this one's numbers and `now`.
    fn alike(&self, decision: Decision, issuer: Issuer) -> Self {
        let numbers = UnsafeCell::new((decision, Nanos::ZERO, self.from()));
        PyDecision { numbers, issuer }
    }

    /// The five numbers.
    #[inline]
    pub fn decision(&self) -> Decision {
        // SAFETY: see `impl Sync`.
        unsafe { (*self.numbers.get()).0 }
    }

    /// The window named by the headers of a `Named` issuer's decision.
    pub fn window(&self) -> Nanos {
        // SAFETY: see `impl Sync`.
        unsafe { (*self.numbers.get()).1 }
    }

    /// The float `now` the caller gave, or NaN.
    pub fn from(&self) -> f64 {
        // SAFETY: see `impl Sync`.
        unsafe { (*self.numbers.get()).2 }
    }

    /// Counts this decision's waits from `now`, the float the caller gave:
    /// `retry_after` is then the float whose sum with `now` reaches the
    /// instant the core named (on an epoch clock, 1.7e9 s, sums are a
    /// quarter of a microsecond apart, and the plain float falls short).
    ///
    /// # Safety
    /// No Python code has seen the object since it was answered, and the
    /// GIL is held.
    #[inline]
    pub unsafe fn count_from(&self, now: f64) {
        (*self.numbers.get()).2 = now;
    }

    /// Makes this the answer `decision` of window `window`, from the same issuer.
    ///
    /// # Safety
    /// Nothing but the caller refers to this object (its reference count is
    /// the caller's one), and the GIL is held.
    #[inline(always)]
    pub unsafe fn rewrite(&self, decision: Decision, window: Nanos) {
        let (old, old_window, from) = &mut *self.numbers.get();
        // Field by field: a copy of the whole would load the caller's
        // fields back 16 bytes at a time (see `settled`).
        old.allowed = decision.allowed;
        old.remaining = decision.remaining;
        old.limit = decision.limit;
        old.retry_after = decision.retry_after;
        old.reset_after = decision.reset_after;
        (*old_window, *from) = (window, f64::NAN);
    }
}

impl PartialEq for PyDecision {
    fn eq(&self, other: &Self) -> bool {
        self.decision() == other.decision()
    }
}

impl Eq for PyDecision {}

impl Hash for PyDecision {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.decision().hash(state);
    }
}

#[pymethods]
impl PyDecision {
    /// For the garbage collector: a policy's decision refers to its policy,
    /// which keeps its last decision (see `Recycler::traverse`).
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.issuer.traverse(&visit)
    }

    /// A decision made elsewhere (by a store such as Redis), for code that
    /// answers with ``Decision`` objects: the five numbers, and what its
    /// ``headers()`` list: the limit ``name`` of ``window`` seconds, or, when
    /// ``limits`` is given, each ``(name, window, decision)`` of it.
    #[new]
    #[pyo3(signature = (allowed, remaining, limit, retry_after, reset_after, *, name = None, window = Nanos::ZERO, limits = None),
           text_signature = "(allowed, remaining, limit, retry_after, reset_after, *, name='default', window=0.0, limits=None)")]
    #[allow(clippy::too_many_arguments)]
    fn py_new(
        #[pyo3(from_py_with = convert::allowed)] allowed: bool,
        #[pyo3(from_py_with = convert::remaining)] remaining: u64,
        #[pyo3(from_py_with = convert::limit)] limit: u64,
        #[pyo3(from_py_with = convert::retry_after)] retry_after: Nanos,
        #[pyo3(from_py_with = convert::reset_after)] reset_after: Nanos,
        name: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = convert::span)] window: Nanos,
        #[pyo3(from_py_with = convert::limits)] limits: Option<Vec<(String, Nanos, Decision)>>,
    ) -> PyResult<Self> {
        // Read as text, so that a lone surrogate is the binding's error; and
        // a name as a limiter's, which the headers can carry.
        let name = match name {
            Some(name) => convert::limit_name(name.py(), convert::string(name, "name")?)?,
            None => "default",
        };
        let decision = Decision {
            allowed,
            remaining,
            limit,
            retry_after,
            reset_after,
        };
        let items = limits.unwrap_or_else(|| vec![(name.to_owned(), window, decision)]);
        Ok(PyDecision::new(
            decision,
            Issuer::Given(items.into_boxed_slice()),
        ))
    }

    /// Pickling (and ``copy``): the numbers, in nanoseconds, the ``now``
    /// the caller gave, and what ``headers()`` lists, as data: the copy
    /// refers to no limiter or policy. A subclass defined in Python (a
    /// Redis decision) pickles as its constructor call and its ``__dict__``.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        pickle::reduce(slf)
    }

    /// The decision ``__reduce__`` describes (a ``PolicyDecision`` for that ``cls``).
    #[classmethod]
    fn _unpickle<'py>(
        cls: &Bound<'py, PyType>,
        numbers: pickle::Numbers,
        now: f64,
        limits: &Bound<'py, PyAny>,
        denied_by: Option<usize>,
    ) -> PyResult<Bound<'py, PyDecision>> {
        let limits = convert::items::<pickle::Limit>(limits)?;
        pickle::unpickle(cls, numbers, now, limits, denied_by)
    }

    /// Whether the request was admitted (and its cost consumed).
    #[getter]
    fn allowed(&self) -> bool {
        self.decision().allowed
    }

    /// Units still available now, after this request's cost if it was admitted.
    #[getter]
    fn remaining(&self) -> u64 {
        self.decision().remaining
    }

    /// The most units the limiter can ever hold: its capacity or limit.
    #[getter]
    fn limit(&self) -> u64 {
        self.decision().limit
    }

    /// Seconds to wait until the same request would be allowed (0.0 when allowed).
    ///
    /// Given a float or int ``now``, the float whose sum with ``now`` reaches
    /// that instant (on the epoch, up to a quarter of a microsecond longer).
    #[getter]
    fn retry_after(&self) -> f64 {
        let (wait, from) = (self.decision().retry_after, self.from());
        if from.is_nan() {
            wait.as_secs_f64()
        } else {
            wait.as_secs_f64_after(from)
        }
    }

    /// Seconds until the limiter is back to its fresh state (full, or empty window).
    #[getter]
    fn reset_after(&self) -> f64 {
        self.decision().reset_after.as_secs_f64()
    }

    /// The HTTP RateLimit header values of this decision, as a dict.
    ///
    /// The same as ``x.headers(decision)`` for the limiter, keyed limiter
    /// or policy ``x`` that decided: ``RateLimit-Policy`` and ``RateLimit``
    /// always, and ``Retry-After`` when denied. A policy's decision lists
    /// every limit; one limit's decision within it (``.limits``), that limit.
    /// A limiter's decision names the window it was decided under, even
    /// after ``x.reconfigure(...)`` (``x.headers`` names the current one).
    fn headers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        match &self.issuer {
            Issuer::Named(name) => named_headers(py, name, self.window(), &self.decision()),
            Issuer::Policy { policy, limits } => {
                policy
                    .get()
                    .headers_of(py, limits.limits(), &self.decision())
            }
            Issuer::PolicyLimit(policy, index) => {
                policy.get().limit_headers_of(py, *index, &self.decision())
            }
            Issuer::Given(items) | Issuer::GivenPolicy { limits: items, .. } => headers_dict(
                py,
                items
                    .iter()
                    .map(|(name, window, d)| (name.as_str(), *window, d)),
                &self.decision(),
            ),
        }
    }

    fn __bool__(&self) -> bool {
        self.decision().allowed
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Decision(allowed={}, remaining={}, limit={}, retry_after={}, reset_after={})",
            if self.decision().allowed {
                "True"
            } else {
                "False"
            },
            self.decision().remaining,
            self.decision().limit,
            float_repr(py, self.retry_after())?,
            float_repr(py, self.reset_after())?,
        ))
    }
}

/// How a reservation gives its booking back: `refund(owner, slot, cost,
/// extent, latest_only)` (see `Core::refund_booking`); when `latest_only`,
/// only while no event touched its states since it where the owner gives
/// back only its latest (see `_give_back`).
pub type Refund = Box<dyn Fn(&Bound<'_, PyAny>, Nanos, u64, usize, bool) + Send + Sync>;

/// A booking made by ``reserve()``: proceed after ``wait`` seconds.
///
/// ``bool(reservation)`` is ``reservation.ok``. When ``ok``, ``cost`` units
/// are booked for the slot ``at`` (``now + wait`` on the limiter's clock);
/// requests made later, reserved or not, are served after it, so waiters are
/// served first come, first served. When not ``ok`` (the wait would have
/// exceeded ``max_wait``, or the queue is full), nothing was booked:
/// ``decision`` tells why, and ``wait`` and ``at`` say when the request would
/// have been served (``decision.retry_after``). ``cancel()`` gives an unused
/// booking back.
#[pyclass(frozen, name = "Reservation", module = "ratekeeper")]
pub struct PyReservation {
    /// The limiter, keyed limiter or policy that booked it. Kept here, not
    /// in `refund`, so that the garbage collector sees it (`__traverse__`):
    /// an object that keeps both its limiter and a reservation of it is
    /// then freed with them.
    owner: Py<PyAny>,
    /// Gives `cost` back to `owner` at the slot (`cancel()`).
    refund: Refund,
    cost: u64,
    now: Nanos,
    booked: Result<Nanos, Py<PyDecision>>,
    cancelled: AtomicBool,
    /// Its booking's event of the limiter (a booking of a slot to come),
    /// else the limiter's count of events then (see `Shared::event`).
    seq: u64,
    /// What the booking reached (a policy's limits then: `Core::extent`).
    extent: usize,
}

impl PyReservation {
    /// A booking `booked` at `now`: `Ok(wait)`, or the refusal; reaching
    /// `extent` (see `Core::extent`).
    pub fn new(
        owner: Py<PyAny>,
        refund: Refund,
        cost: u64,
        now: Nanos,
        booked: Result<Nanos, Py<PyDecision>>,
        extent: usize,
    ) -> Self {
        let cancelled = AtomicBool::new(false);
        PyReservation {
            owner,
            refund,
            cost,
            now,
            booked,
            cancelled,
            seq: 0,
            extent,
        }
    }

    /// The booked slot, cost and extent, taken out for `owner` to give
    /// back itself (as `cancel()` would, once): `None` when `owner` did not
    /// book it, nothing was booked, or it was given back already.
    pub fn take_for(&self, owner: &Bound<'_, PyAny>) -> Option<(Nanos, u64, usize)> {
        let slot = self.slot().filter(|_| self.owner.is(owner))?;
        let taken = (slot, self.cost, self.extent);
        (!self.cancelled.swap(true, Ordering::AcqRel)).then_some(taken)
    }

    /// What the booking reached (see `Core::extent`).
    pub fn extent(&self) -> usize {
        self.extent
    }

    /// This reservation, of the event `seq` of its limiter (see `seq`).
    pub fn with_seq(self, seq: u64) -> Self {
        PyReservation { seq, ..self }
    }

    /// The wait until the slot: booked, or needed (a refusal's `retry_after`).
    fn wait_nanos(&self) -> Nanos {
        match &self.booked {
            Ok(wait) => *wait,
            Err(denied) => denied.get().decision().retry_after,
        }
    }

    /// The wait from `now` (on the clock it was booked on) to the booked
    /// slot; zero once it has come, or when nothing was booked.
    pub fn left(&self, now: Nanos) -> Nanos {
        self.slot()
            .map_or(Nanos::ZERO, |slot| slot.saturating_sub(now))
    }

    /// Gives the booking back once, if there is one (see `Refund` for
    /// `latest_only`).
    fn give_back(&self, py: Python<'_>, latest_only: bool) {
        if let Some(slot) = self.slot() {
            if !self.cancelled.swap(true, Ordering::AcqRel) {
                (self.refund)(
                    self.owner.bind(py),
                    slot,
                    self.cost,
                    self.extent,
                    latest_only,
                );
            }
        }
    }

    /// The booked slot, if any.
    fn slot(&self) -> Option<Nanos> {
        let wait = *self.booked.as_ref().ok()?;
        Some(self.now.saturating_add(wait))
    }
}

#[pymethods]
impl PyReservation {
    /// For the garbage collector: the booking's owner, and a refusal's
    /// decision.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.owner)?;
        if let Err(denied) = &self.booked {
            visit.call(denied)?;
        }
        Ok(())
    }

    /// Whether the units were booked.
    #[getter]
    fn ok(&self) -> bool {
        self.booked.is_ok()
    }

    /// Seconds from the reservation until the booked slot (when not ``ok``:
    /// the wait that was needed, ``decision.retry_after``; nothing is booked).
    #[getter]
    fn wait(&self) -> f64 {
        match &self.booked {
            Ok(wait) => wait.as_secs_f64(),
            // As the decision counts it from the `now` given (see `count_from`).
            Err(denied) => denied.get().retry_after(),
        }
    }

    /// The slot, in seconds on the limiter's clock: ``now + wait``. When
    /// ``ok``, the booking's ``taken_at`` for ``refund`` (``cancel()`` does that).
    #[getter]
    fn at(&self) -> f64 {
        self.now.saturating_add(self.wait_nanos()).as_secs_f64()
    }

    /// Which event of its limiter its booking was, or the count of events
    /// then (for ``acquire_async``).
    #[getter]
    fn _seq(&self) -> u64 {
        self.seq
    }

    /// The units the reservation asked for.
    #[getter]
    fn cost(&self) -> u64 {
        self.cost
    }

    /// Why nothing was booked (a denied Decision), or ``None`` when ``ok``.
    #[getter]
    fn decision(&self, py: Python<'_>) -> Option<Py<PyDecision>> {
        self.booked
            .as_ref()
            .err()
            .map(|denied| denied.clone_ref(py))
    }

    /// Gives the booking back, exactly at its slot: the next requests may
    /// use it. Call it when the booked work will not happen; once is enough
    /// (later calls, and calls on a reservation that is not ``ok``, do nothing).
    fn cancel(&self, py: Python<'_>) {
        self.give_back(py, false);
    }

    /// Gives the booking back as an interrupted ``acquire`` does: as
    /// ``cancel()``, but a bucket's (or a policy's with one) only while it is
    /// the latest booking of its limiter: given back from the middle of the
    /// queue, it would free the slot of the last waiter, still asleep, for
    /// the next caller. Else its slot goes unused.
    fn _give_back(&self, py: Python<'_>) {
        self.give_back(py, true);
    }

    fn __bool__(&self) -> bool {
        self.ok()
    }

    /// Refuses: a booking is a slot of one live limiter, which no copy holds.
    fn __reduce__(&self) -> PyResult<()> {
        let why = "it is a booking on a live limiter (its numbers and its decision are data)";
        Err(cannot_pickle("ratekeeper.Reservation", why))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(match &self.booked {
            Ok(_) => format!(
                "Reservation(ok=True, wait={}, at={}, cost={})",
                float_repr(py, self.wait())?,
                float_repr(py, self.at())?,
                self.cost
            ),
            Err(denied) => format!(
                "Reservation(ok=False, cost={}, decision={})",
                self.cost,
                denied.bind(py).repr()?
            ),
        })
    }
}

/// The outcome of one request against a ``Policy``: a Decision combining
/// every limit's, plus which limit denied and each limit's own decision.
///
/// ``allowed`` only if every limit allowed (and then every limit consumed
/// the cost; a denial consumes nothing anywhere). ``remaining`` and
/// ``limit`` are the tightest limit's, ``retry_after`` and ``reset_after``
/// the longest. ``denied_by`` names the limit that denied (the one with the
/// longest wait), ``None`` when allowed; ``limits`` lists ``(name,
/// Decision)`` for every limit, in the policy's order. ``headers()`` lists
/// every limit.
///
/// Made by a ``Policy`` (or copied from one), not subclassable: a ``RedisPolicy``'s
/// answer, ``ratekeeper.redis.RedisPolicyDecision``, is a ``Decision`` with
/// the same ``denied_by`` and ``limits``, but not a ``PolicyDecision``.
#[pyclass(frozen, extends = PyDecision, name = "PolicyDecision", module = "ratekeeper")]
pub struct PyPolicyDecision;

/// The error of a `PolicyDecision` no policy made, which has no limits to
/// tell: a `Decision` whose `__class__` its holder assigned (Python allows
/// it between classes of one layout).
#[cold]
fn made_by_no_policy() -> PyErr {
    PyTypeError::new_err(
        "this PolicyDecision was made by no policy: a Decision whose __class__ was assigned",
    )
}

#[pymethods]
impl PyPolicyDecision {
    /// The name of the limit that denied (the one with the longest wait), or
    /// ``None`` when allowed.
    #[getter]
    fn denied_by(slf: &Bound<'_, Self>) -> PyResult<Option<Py<PyString>>> {
        let py = slf.py();
        match &slf.as_super().get().issuer {
            Issuer::Policy { policy, limits } => limits
                .denied_by()
                .map(|index| policy.get().limit_name(py, index))
                .transpose(),
            Issuer::GivenPolicy { limits, denied_by } => {
                Ok(denied_by.map(|index| PyString::new(py, &limits[index].0).unbind()))
            }
            _ => Err(made_by_no_policy()),
        }
    }

    /// Every limit's own decision, as a list of ``(name, Decision)`` in the
    /// policy's order. When some limit denied, those that would have allowed
    /// report their state as it stays (nothing was consumed).
    #[getter]
    fn limits<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyList>> {
        let py = slf.py();
        let base = slf.as_super().get();
        let item = |name: Py<PyString>, decision, issuer| {
            let decision = Bound::new(py, base.alike(decision, issuer))?;
            PyTuple::new(py, [name.into_any(), decision.into_any().unbind()])
        };
        let items = match &base.issuer {
            Issuer::Policy { policy, limits } => limits
                .limits()
                .iter()
                .enumerate()
                .map(|(index, decision)| {
                    let issuer = Issuer::PolicyLimit(policy.clone_ref(py), index);
                    item(policy.get().limit_name(py, index)?, *decision, issuer)
                })
                .collect::<PyResult<Vec<_>>>()?,
            Issuer::GivenPolicy { limits, .. } => limits
                .iter()
                .map(|limit| {
                    let name = PyString::new(py, &limit.0).unbind();
                    item(name, limit.2, Issuer::Given(Box::new([limit.clone()])))
                })
                .collect::<PyResult<Vec<_>>>()?,
            _ => return Err(made_by_no_policy()),
        };
        PyList::new(py, items)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let py = slf.py();
        let base = slf.as_super().get().__repr__(py)?;
        let denied_by = Self::denied_by(slf)?;
        let denied_by = match denied_by {
            Some(name) => name.bind(py).repr()?.to_string(),
            None => "None".into(),
        };
        let fields = &base["Decision(".len()..base.len() - 1];
        Ok(format!("PolicyDecision({fields}, denied_by={denied_by})"))
    }
}
