//! `ratekeeper.KeyedLimiter`: one limiter per key on the core's `AnyKeyed`.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use ratekeeper::{AnyKeyed, Decision, Error, Eviction, Nanos};

use crate::algorithms;
use crate::convert::{self, Key};
use crate::decision::{named_headers, settled};
use crate::errors::to_py;
use crate::recycle::Recycler;
use crate::shared::{self, limiter_methods, Core, Shared, Subject};

/// One limiter per key, all configured like ``limiter``, in one store.
///
/// ``KeyedLimiter(limiter, *, max_keys=None, eviction="nearest_fresh")``:
/// ``limiter`` is any ratekeeper limiter, used for its configuration only
/// (every key starts as a fresh copy of it), its ``name`` (for the
/// RateLimit headers) and its ``clock``. Keys are ``str`` (as UTF-8),
/// ``bytes`` or ``int`` (as its decimal digits, so ``42`` and ``"42"`` are
/// the same key).
///
/// A key's state is kept only while it differs from a fresh limiter's: a
/// key is stored by the first request that changes it, and keys back to
/// fresh are dropped as the store grows (or by ``reclaim()``), which loses
/// nothing. A GCRA key takes one 64-bit word. ``max_keys`` bounds the store;
/// at the bound, ``eviction="nearest_fresh"`` (the default) forgets the keys
/// nearest to fresh (a forgotten key may be admitted early by at most what
/// its state still held), and ``eviction="refuse"`` raises
/// ``RateLimitError`` (code ``store_full``) for a new key instead, and
/// without ``max_keys`` is refused (``invalid_value``): an unbounded store
/// never refuses a key.
///
/// Time is kept per store: a call with a ``now`` earlier than the latest
/// the store has seen (for any key) is decided as of that latest time.
/// Every method takes the key first, then the limiter's arguments; safe to
/// share between threads. A store does not pickle (the core has no encoding
/// for a whole store).
#[pyclass(frozen, name = "KeyedLimiter", module = "ratekeeper")]
pub struct PyKeyedLimiter {
    shared: Shared<AnyKeyed>,
    name: Py<PyString>,
    window: Nanos,
    max_keys: Option<usize>,
    eviction: Eviction,
    recycler: Recycler,
}

impl Core for AnyKeyed {
    type Target = [u8];
    type Owned = Box<[u8]>;
    type Answer = Decision;

    #[inline]
    fn try_acquire(&mut self, key: &[u8], now: Nanos, cost: u64) -> Result<Decision, Error> {
        settled(AnyKeyed::try_acquire(self, key, now, cost))
    }

    fn peek(&mut self, key: &[u8], now: Nanos, cost: u64) -> Result<Decision, Error> {
        settled(AnyKeyed::peek(self, key, now, cost))
    }

    fn reserve(
        &mut self,
        key: &[u8],
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> Result<Result<Nanos, Decision>, Error> {
        AnyKeyed::reserve(self, key, now, cost, max_wait)
    }

    fn refund(&mut self, key: &[u8], taken_at: Nanos, cost: u64) -> Result<(), Error> {
        AnyKeyed::refund(self, key, taken_at, cost);
        Ok(())
    }

    fn gives_back_anywhere(&self) -> bool {
        self.refunds_any_booking()
    }

    fn moves_up(&self) -> bool {
        AnyKeyed::moves_up(self)
    }

    /// The key's mark: a call on one key touches no other's state.
    fn marks(&self, key: &[u8], _: usize) -> Vec<u8> {
        vec![shared::mark(0, key)]
    }

    fn to_owned(key: &[u8]) -> Box<[u8]> {
        key.into()
    }

    fn borrow(owned: &Box<[u8]>) -> &[u8] {
        owned
    }
}

shared::named_subject!(PyKeyedLimiter, AnyKeyed);

impl PyKeyedLimiter {
    /// The RateLimit header values of `decision` under the store's name and window.
    pub fn headers_of<'py>(
        &self,
        py: Python<'py>,
        decision: &Decision,
    ) -> PyResult<Bound<'py, PyDict>> {
        named_headers(py, &self.name, self.window, decision)
    }

    /// Every key's window.
    pub fn window_nanos(&self) -> Nanos {
        self.window
    }

    /// Every key's configuration and name (`ratekeeper.guarantee`).
    pub fn prototype(&self, py: Python<'_>) -> (ratekeeper::AnyLimiter, String) {
        let name = self.name.bind(py).to_string();
        (self.shared.lock(py).prototype(), name)
    }

    /// A new, empty store of this one's configuration and bound.
    pub fn empty_store(&self, py: Python<'_>) -> PyResult<AnyKeyed> {
        let store = AnyKeyed::new(self.shared.lock(py).prototype());
        match self.max_keys {
            Some(max_keys) => store.with_max_keys(max_keys, self.eviction),
            None => Ok(store),
        }
        .map_err(|err| to_py(py, err))
    }

    /// The constructor call of a fresh limiter of every key's configuration.
    fn prototype_call<'py>(&self, py: Python<'py>) -> PyResult<algorithms::Call<'py>> {
        let prototype = self.shared.lock(py).prototype();
        let call = algorithms::constructor(py, &prototype)?;
        if self.name.bind(py).to_cow()? != "default" {
            call.kwargs.set_item(intern!(py, "name"), &self.name)?;
        }
        Ok(call)
    }
}

limiter_methods!(
    #[pymethods] PyKeyedLimiter, "``key``'s limiter", [key: Key<'_> = convert::key],
    reserve = "($self, /, key, cost=1, *, max_wait=None, now=None)",
    reclaim = "Drop every key back to fresh at ``now`` (default: the clock's reading). The store does this on its own as it grows; call it to shrink an idle store (memory is given back once a quarter or less of its room is in use). Answers do not change, but for a token bucket with interval refill: a full key dropped counts its periods from its next call, so its next refill may come later, never sooner.",
    headers = "the store's (its limiter's)" {
        #[new]
        #[pyo3(signature = (limiter, *, max_keys = None, eviction = None),
               text_signature = "(limiter, *, max_keys=None, eviction='nearest_fresh')")]
        fn new(
            py: Python<'_>,
            limiter: &Bound<'_, PyAny>,
            #[pyo3(from_py_with = convert::max_keys)] max_keys: Option<usize>,
            #[pyo3(from_py_with = convert::eviction)] eviction: Option<Eviction>,
        ) -> PyResult<Self> {
            let limiter = convert::limiter(limiter)?.get();
            // AnyKeyed::new takes its configuration, never called.
            let prototype = limiter.configuration(py);
            let window = prototype.window();
            let mut store = AnyKeyed::new(prototype)
                .bounded(max_keys.map(|max| max as u64), eviction)
                .map_err(|err| to_py(py, err))?;
            let (seed, bits) = crate::hash_seed::host_seed();
            store.seed_hashes(seed, bits);
            Ok(PyKeyedLimiter {
                shared: Shared::new(
                    store,
                    limiter.clock().map(|clock| clock.clone_ref(py)),
                ),
                name: limiter.name_ref().clone_ref(py),
                window,
                max_keys,
                eviction: eviction.unwrap_or_default(),
                recycler: Recycler::default(),
            })
        }

        /// Decide each of ``costs`` for ``key``, in order, as that many
        /// ``try_acquire`` calls at one ``now`` would, with one lookup; returns
        /// a list of Decisions.
        ///
        /// The server's half of batching a hot key. A cost above ``limit``
        /// raises ``RateLimitError`` (``cost_exceeds_limit``, naming the first
        /// such cost) before anything is decided, and before a full store's
        /// ``store_full``.
        #[pyo3(signature = (key, costs, now = None))]
        fn try_acquire_batch<'py>(
            slf: &Bound<'py, Self>,
            #[pyo3(from_py_with = convert::key)] key: Key<'_>,
            costs: &Bound<'py, PyAny>,
            #[pyo3(from_py_with = convert::moment)] now: Option<convert::Now>,
        ) -> PyResult<Bound<'py, PyList>> {
            let py = slf.py();
            let costs = convert::costs(costs)?;
            let shared = &slf.get().shared;
            let at = shared.now(py, now.map(|now| now.at))?;
            let undecided = Error::InvalidValue {
                name: "costs",
                reason: "was not decided",
            };
            let mut decided = vec![Err(undecided); costs.len()];
            let batch = {
                let mut store = shared.lock(py);
                // The core fails only an entry whose cost exceeds the limit:
                // checked first, so that nothing is decided.
                store.check_batch(key.as_ref(), at, &costs).and_then(|()| {
                    store.try_acquire_batch(key.as_ref(), at, &costs, &mut decided)
                })
            };
            batch.map_err(|err| to_py(py, err))?;
            let mut answers = Vec::with_capacity(costs.len());
            for decision in decided {
                let answer = <Self as Subject>::answer(slf, decision.map_err(|err| to_py(py, err))?)?;
                answers.push(shared::answered(answer, now)?);
            }
            PyList::new(py, answers)
        }

        /// Put ``key`` back to fresh, as a key never seen; returns whether the
        /// store held it (a key not held is fresh already).
        ///
        /// Its units and the bookings made on it are forgotten: what
        /// ``reset_after`` waits for, at once (a login limit cleared once its
        /// user signed in, say). A caller already waiting still goes at its
        /// slot, and its cancel then gives nothing back, nor does that of any
        /// booking of the key made before the reset (the store cannot tell
        /// which it forgot, and the key, used again, may book their slots
        /// anew: given back, one would free a unit of those); waiters of the
        /// key behind a cancelled one stay where they were, as after a
        /// ``reconfigure`` (unless the store did not hold the key: then
        /// nothing changed). Other keys' bookings are given back as before.
        #[pyo3(signature = (key))]
        fn reset(&self, py: Python<'_>, #[pyo3(from_py_with = convert::key)] key: Key<'_>) -> bool {
            let mut core = self.shared.lock(py);
            let held = core.reset(key.as_ref());
            // Its bookings may be gone: as a reconfigure, for its waiters,
            // and none made before gives anything back (see
            // Shared::forgot); other keys' do. A key not held: the reset
            // changed nothing.
            if held {
                self.shared.forgot(&[shared::mark(0, key.as_ref())]);
            }
            held
        }

        /// The number of keys held (those not known to be fresh).
        fn __len__(&self, py: Python<'_>) -> usize {
            self.shared.lock(py).len()
        }

        /// The most units a key admits at once.
        #[getter]
        fn limit(&self, py: Python<'_>) -> u64 {
            self.shared.lock(py).limit()
        }

        /// Seconds over which a key's ``limit`` units are granted (the ``w``
        /// of RateLimit-Policy).
        #[getter]
        fn window(&self) -> f64 {
            self.window.as_secs_f64()
        }

        /// Every key's algorithm, e.g. ``"gcra"``.
        #[getter]
        fn algorithm(&self, py: Python<'_>) -> &'static str {
            self.shared.lock(py).prototype().algorithm()
        }

        /// The store's name (its limiter's), as its RateLimit headers spell it.
        #[getter]
        fn name(&self, py: Python<'_>) -> Py<PyString> {
            self.name.clone_ref(py)
        }

        /// The most keys the store holds, or ``None``.
        #[getter]
        fn max_keys(&self) -> Option<usize> {
            self.max_keys
        }

        /// What happens at ``max_keys``: ``"nearest_fresh"`` or ``"refuse"``.
        #[getter]
        fn eviction(&self) -> &'static str {
            self.eviction.name()
        }

        /// A fresh limiter of every key's configuration (and the store's name
        /// and clock).
        #[getter]
        fn limiter<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
            let call = self.prototype_call(py)?;
            if let Some(clock) = self.shared.clock() {
                call.kwargs.set_item(intern!(py, "clock"), clock.bind(py))?;
            }
            call.factory()?.call(&call.args, Some(&call.kwargs))
        }

        fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
            let mut text = format!("KeyedLimiter({}", self.prototype_call(py)?.describe()?);
            if let Some(max_keys) = self.max_keys {
                text += &format!(", max_keys={max_keys}");
            }
            if self.eviction != Eviction::NearestFresh {
                text += &format!(", eviction='{}'", self.eviction());
            }
            Ok(text + ")")
        }
    }
);
