//! Pickling (and `copy`) of `Decision` and `PolicyDecision` as data: the
//! five numbers in nanoseconds (a float of seconds is not exact beyond
//! 2^53 ns, 104 days), the `now` a limiter's decision counts its waits
//! from, and what `headers()` lists, read from the limiter or policy that
//! decided, so that the copy refers to neither.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple, PyType};
use ratekeeper::{Decision, Error, Nanos};

use crate::convert;
use crate::decision::{Issuer, PyDecision, PyPolicyDecision};
use crate::errors::to_py;

/// A decision's five numbers as pickled, durations in nanoseconds.
pub type Numbers = (bool, u64, u64, u64, u64);

/// A limit listed in the headers as pickled: name, window (ns), numbers.
pub type Limit = (String, u64, Numbers);

fn numbers(d: &Decision) -> Numbers {
    let (retry, reset) = (d.retry_after.0, d.reset_after.0);
    (d.allowed, d.remaining, d.limit, retry, reset)
}

fn from_numbers((allowed, remaining, limit, retry, reset): Numbers) -> Decision {
    let (retry_after, reset_after) = (Nanos(retry), Nanos(reset));
    Decision {
        allowed,
        remaining,
        limit,
        retry_after,
        reset_after,
    }
}

/// What `decision.headers()` lists, as data: each limit's (name, window,
/// decision), read from its issuer now.
fn header_items(py: Python<'_>, decision: &PyDecision) -> PyResult<Vec<(String, Nanos, Decision)>> {
    let with = |named: Vec<(String, Nanos)>, decisions: &[Decision]| {
        let items = named.into_iter().zip(decisions);
        items
            .map(|((name, window), d)| (name, window, *d))
            .collect()
    };
    Ok(match &decision.issuer {
        Issuer::Named(name) => {
            let name = name.bind(py).to_cow()?.into_owned();
            vec![(name, decision.window(), decision.decision())]
        }
        Issuer::Policy { policy, limits } => {
            let limits = limits.limits();
            with(policy.get().limits(py, limits.len()), limits)
        }
        Issuer::PolicyLimit(policy, index) => {
            let named = policy.get().limits(py, index + 1).into_iter().skip(*index);
            with(named.collect(), &[decision.decision()])
        }
        Issuer::Given(items) | Issuer::GivenPolicy { limits: items, .. } => items.to_vec(),
    })
}

/// `Decision.__reduce__`: `cls._unpickle(numbers, now, limits, denied_by)`
/// for the binding's own classes, a constructor call for a subclass.
pub fn reduce<'py>(slf: &Bound<'py, PyDecision>) -> PyResult<Bound<'py, PyTuple>> {
    let py = slf.py();
    let this = slf.get();
    let (cls, items) = (slf.get_type(), header_items(py, this)?);
    if !cls.is(py.get_type::<PyDecision>()) && !cls.is(py.get_type::<PyPolicyDecision>()) {
        return reduce_subclass(slf, items);
    }
    let denied_by = match &this.issuer {
        Issuer::Policy { limits, .. } => limits.denied_by(),
        Issuer::GivenPolicy { denied_by, .. } => *denied_by,
        _ => None,
    };
    let items = items.iter();
    let items: Vec<_> = items
        .map(|(name, window, d)| (name.as_str(), window.0, numbers(d)))
        .collect();
    let arguments = (numbers(&this.decision()), this.from(), items, denied_by);
    let rebuild = cls.getattr(intern!(py, "_unpickle"))?;
    PyTuple::new(py, [rebuild, arguments.into_pyobject(py)?.into_any()])
}

/// `__reduce__` of a Python subclass (a Redis decision): `cls.__new__(cls,
/// ...)` as `copyreg` spells it, then its `__dict__`. Its seconds are exact:
/// a float where one holds the nanoseconds, else a `Fraction`. (Only a
/// limiter's own decisions count their waits from a `now`.)
fn reduce_subclass<'py>(
    slf: &Bound<'py, PyDecision>,
    items: Vec<(String, Nanos, Decision)>,
) -> PyResult<Bound<'py, PyTuple>> {
    let py = slf.py();
    let seconds = |nanos| convert::seconds_object(py, nanos);
    let limits = items.into_iter().map(|(name, window, d)| {
        // A limit's decision is read for its numbers only.
        let given = Bound::new(py, PyDecision::new(d, Issuer::Given(Box::new([]))))?;
        Ok((name, seconds(window)?, given))
    });
    let kwargs = PyDict::new(py);
    kwargs.set_item(intern!(py, "limits"), limits.collect::<PyResult<Vec<_>>>()?)?;
    let d = slf.get().decision();
    let (retry_after, reset_after) = (seconds(d.retry_after)?, seconds(d.reset_after)?);
    let args = (d.allowed, d.remaining, d.limit, retry_after, reset_after);
    let copyreg = py.import(intern!(py, "copyreg"))?;
    let newobj = copyreg.getattr(intern!(py, "__newobj_ex__"))?;
    let arguments = (slf.get_type(), args, kwargs).into_pyobject(py)?.into_any();
    let state = slf
        .getattr_opt(intern!(py, "__dict__"))?
        .into_pyobject(py)?;
    PyTuple::new(py, [newobj, arguments, state.into_any()])
}

/// `Decision._unpickle`: what [`reduce`] described, a `Decision`, or a
/// `PolicyDecision` when `cls` is that.
pub fn unpickle<'py>(
    cls: &Bound<'py, PyType>,
    numbers: Numbers,
    now: f64,
    limits: Vec<Limit>,
    denied_by: Option<usize>,
) -> PyResult<Bound<'py, PyDecision>> {
    let py = cls.py();
    let limits = limits.into_iter();
    let limits = limits.map(|(name, window, d)| (name, Nanos(window), from_numbers(d)));
    let limits: Box<[_]> = limits.collect();
    let decision = from_numbers(numbers);
    if !cls.is(py.get_type::<PyPolicyDecision>()) {
        let given = PyDecision::restored(decision, now, Issuer::Given(limits));
        return Bound::new(py, given);
    }
    // Checked, so that no pickle, however made, reads past the limits.
    if denied_by.is_some_and(|index| index >= limits.len()) {
        let (name, reason) = ("denied_by", "must name one of the limits");
        return Err(to_py(py, Error::InvalidValue { name, reason }));
    }
    let issuer = Issuer::GivenPolicy { limits, denied_by };
    let init = PyClassInitializer::from(PyDecision::restored(decision, now, issuer));
    Ok(Bound::new(py, init.add_subclass(PyPolicyDecision))?.into_super())
}
