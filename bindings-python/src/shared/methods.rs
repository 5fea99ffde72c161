//! The macros that write each deciding class's Python methods once.

/// Implements [`Subject`](super::Subject) for a class `$class` with a `shared: Shared<$core>`,
/// a `name`, a `recycler` and a `window_nanos()`, answering plain Decisions
/// named after it.
macro_rules! named_subject {
    ($class:ty, $core:ty) => {
        impl $crate::shared::Subject for $class {
            type Core = $core;

            fn shared(&self) -> &$crate::shared::Shared<$core> {
                &self.shared
            }

            type Pending = ::ratekeeper::Decision;

            #[inline(always)]
            fn settle<'py>(
                _: &Bound<'py, Self>,
                _: &$core,
                answer: ::ratekeeper::Decision,
            ) -> $crate::shared::Settled<'py, ::ratekeeper::Decision> {
                $crate::shared::Settled::Pending(answer)
            }

            #[inline]
            fn answer<'py>(
                slf: &Bound<'py, Self>,
                answer: ::ratekeeper::Decision,
            ) -> PyResult<Bound<'py, $crate::decision::PyDecision>> {
                let this = slf.get();
                this.recycler
                    .answer(slf.py(), answer, &this.name, this.window_nanos())
            }

            fn recycler(&self) -> &$crate::recycle::Recycler {
                &self.recycler
            }

            fn rate_limited(&self, py: Python<'_>, denied: &::ratekeeper::Decision) -> PyErr {
                match self.name.bind(py).to_cow() {
                    Ok(name) => $crate::errors::rate_limited(py, &name, denied),
                    Err(err) => err,
                }
            }
        }
    };
}

pub(crate) use named_subject;

/// Writes the methods every deciding class shares, once: `try_acquire`,
/// `peek`, `reserve`, `refund`, `acquire_async`, `acquiring` and `_book`,
/// each taking the class's target (`key`, `request`, or none) before
/// `cost`; plus the class's own `$extra` methods. (`acquire` is written in
/// Python, on `_book`: see `ratekeeper/_wait.py`.)
///
/// The caller writes the `#[pymethods]` attribute: the names pyo3 generates
/// (for `*args`, say) then share the caller's hygiene with its arguments.
macro_rules! limiter_methods {
    // The entry: the methods written once for every class, then the pairs of
    // methods that share one template (`@decide`, `@wait`), then the impl.
    // A class answering with a Decision says so in these words; another
    // (a policy) gives its answer's class and `try_acquire`'s docstring.
    (
        $hash:tt $pymethods:tt $class:ty, $what:literal, $spec:tt,
        reserve = $reserve_signature:literal $(, reclaim = $reclaim:literal)?
        $(, headers = $headers:literal)? { $($extra:tt)* }
    ) => {
        limiter_methods!($hash $pymethods $class, $what, $spec, answer = "Decision",
            try_acquire = [concat!("Take ``cost`` units from ", $what, " if it has them, and say what happened."),
                "", "Returns a Decision: ``allowed`` (then the cost is consumed),",
                "``remaining``, ``limit``, ``retry_after`` and ``reset_after``. A",
                "denial consumes nothing and is not an exception. A ``cost`` above",
                "``limit`` raises ``RateLimitError`` (code ``cost_exceeds_limit``),",
                "since it could never be allowed."],
            reserve = $reserve_signature $(, reclaim = $reclaim)? $(, headers = $headers)? { $($extra)* });
    };
    (
        $hash:tt $pymethods:tt $class:ty, $what:literal, $spec:tt,
        answer = $answer:literal, try_acquire = [$($try_doc:expr),*],
        reserve = $reserve_signature:literal $(, reclaim = $reclaim:literal)?
        $(, headers = $headers:literal)? { $($extra:tt)* }
    ) => {
        limiter_methods!(@methods $hash $pymethods $class, $what, $spec, $spec,
            answer = $answer, try_acquire = [$($try_doc),*],
            reserve = $reserve_signature $(, reclaim = $reclaim)? $(, headers = $headers)? { $($extra)* });
    };
    (
        @methods $hash:tt $pymethods:tt $class:ty, $what:literal, $spec:tt,
        [$($target:ident $(= $default:ident)?: $tty:ty = $convert:path)?],
        answer = $answer:literal, try_acquire = [$($try_doc:expr),*],
        reserve = $reserve_signature:literal $(, reclaim = $reclaim:literal)?
        $(, headers = $headers:literal)? { $($extra:tt)* }
    ) => {
        limiter_methods!(@step $hash $pymethods $class, $spec, [
            /// For the garbage collector (see `Subject::traverse`).
            fn __traverse__(&self, visit: ::pyo3::PyVisit<'_>) -> Result<(), ::pyo3::PyTraverseError> {
                $crate::shared::Subject::traverse(self, &visit)
            }

            /// For the garbage collector: drops the decision kept (a
            /// policy's refers back to it).
            fn __clear__(&self) {
                $crate::shared::Subject::recycler(self).clear();
            }

            #[doc = concat!("Book ``cost`` units of ", $what, " for the earliest slot they fit, if")]
            /// that is at most ``max_wait`` seconds away (``None``, the default, or
            /// ``math.inf``: no bound); returns a Reservation.
            ///
            /// When ``reservation.ok``, the units are booked for ``reservation.at``
            /// (``now + reservation.wait``): proceed then. Bookings are served first
            /// come, first served, and a later ``try_acquire`` never jumps ahead of
            /// one. Otherwise nothing was booked and ``reservation.decision`` says
            #[doc = concat!("why (a denied ", $answer, "). ``reservation.cancel()`` gives an unused")]
            /// booking back. ``acquire`` is this plus the wait.
            #[pyo3(
                signature = ($($target $(= $default)?,)? cost = 1, *, max_wait = ::ratekeeper::Nanos::MAX, now = None),
                text_signature = $reserve_signature
            )]
            fn reserve(
                slf: &Bound<'_, Self>,
                $(#[pyo3(from_py_with = $convert)] $target: $tty,)?
                #[pyo3(from_py_with = $crate::convert::cost)] cost: u64,
                #[pyo3(from_py_with = $crate::convert::max_wait)] max_wait: ::ratekeeper::Nanos,
                #[pyo3(from_py_with = $crate::convert::moment)] now: Option<$crate::convert::Now>,
            ) -> PyResult<$crate::decision::PyReservation> {
                let target = limiter_methods!(@target $($target)?);
                $crate::shared::reserve(slf, target, cost, max_wait, now)
            }

            /// Give back ``cost`` units taken at ``taken_at`` and not used.
            ///
            /// ``taken_at`` (default: now) is when they were taken: the ``now`` of
            /// the ``try_acquire``. For a booking, call ``reservation.cancel()``,
            /// which is exact: ``at`` is a float, which on a clock counting from the
            /// epoch (``time.time``) is a quarter of a microsecond from the next
            /// one, so ``taken_at=at`` may miss the slot. Nothing ever ends up
            /// holding more than when fresh, and a window algorithm only takes
            /// units back from the window (or, for ``SlidingWindowLog``, the
            /// instant) of ``taken_at``.
            #[pyo3(signature = ($($target,)? cost, *, taken_at = None))]
            fn refund(
                slf: &Bound<'_, Self>,
                $(#[pyo3(from_py_with = $convert)] $target: $tty,)?
                #[pyo3(from_py_with = $crate::convert::cost)] cost: u64,
                #[pyo3(from_py_with = $crate::convert::taken_at)] taken_at: Option<::ratekeeper::Nanos>,
            ) -> PyResult<()> {
                let target = limiter_methods!(@target $($target)?);
                $crate::shared::refund(slf, target, cost, taken_at)
            }

            /// Books as ``reserve`` does, within ``timeout`` (else raises
            /// ``RateLimited``), and returns the Reservation, or ``None`` when
            /// there is no wait: for ``acquire`` and ``acquire_async``, which
            /// sleep in Python (see ``ratekeeper/_wait.py``).
            /// ``waiter``: for an ``acquire_async`` waiter, which the waiters'
            /// moving up counts as one of theirs.
            #[pyo3(signature = ($($target $(= $default)?,)? cost = 1, timeout = None, *, waiter = false))]
            fn _book(
                slf: &Bound<'_, Self>,
                $(#[pyo3(from_py_with = $convert)] $target: $tty,)?
                #[pyo3(from_py_with = $crate::convert::cost)] cost: u64,
                timeout: Option<&Bound<'_, PyAny>>,
                waiter: bool,
            ) -> PyResult<Option<$crate::decision::PyReservation>> {
                let target = limiter_methods!(@target $($target)?);
                $crate::shared::book_reservation(slf, target, cost, timeout, waiter)
            }

            /// Gives back ``cancels`` (pairs of a Reservation of this object and the
            /// arguments it was booked with), then books each of ``requests``
            /// (arguments) in order, as one step no other call comes between (for
            /// ``acquire_async``'s waiters moving up); does nothing and returns
            /// ``None`` once an event touched the states of one of ``cancels``
            /// after the event ``since`` (the cancelled waiter's
            /// ``Reservation._seq``): any, when ``latest_only``; else one no waiter
            /// made. Returns each request's Reservation, or the exception its
            /// booking raised.
            fn _rebook<'py>(
                slf: &Bound<'py, Self>,
                since: u64,
                latest_only: bool,
                cancels: &Bound<'py, PyAny>,
                requests: &Bound<'py, PyAny>,
            ) -> PyResult<Option<Vec<Bound<'py, PyAny>>>> {
                let cancels: Vec<(Bound<'py, $crate::decision::PyReservation>, Bound<'py, ::pyo3::types::PyTuple>)> =
                    $crate::convert::items(cancels)?;
                let requests: Vec<Bound<'py, ::pyo3::types::PyTuple>> = $crate::convert::items(requests)?;
                // Each request's target object and cost, then the targets read
                // from them (a key borrows its object's text).
                let split = |args: &Bound<'py, ::pyo3::types::PyTuple>| -> PyResult<(Bound<'py, PyAny>, u64)> {
                    let cost = args.get_item(args.len().saturating_sub(1))?;
                    Ok((args.get_item(0)?, $crate::convert::cost(&cost)?))
                };
                let args = cancels.iter().map(|(_, args)| args).chain(&requests)
                    .map(split).collect::<PyResult<Vec<_>>>()?;
                let mut targets = Vec::with_capacity(args.len());
                for (_obj, cost) in &args {
                    $(let $target = $convert(_obj)?;)?
                    targets.push((limiter_methods!(@value $($target)?), *cost));
                }
                let mut targets = targets.iter().map(|(value, cost)| (limiter_methods!(@of value $($target)?), *cost));
                let cancels: Vec<_> = cancels.iter().zip(targets.by_ref())
                    .map(|((reservation, _), (target, _))| (reservation, target))
                    .collect();
                let requests: Vec<_> = targets.collect();
                $crate::shared::rebook(slf, since, latest_only, &cancels, &requests)
            }

            /// Whether a booking given back may stand anywhere among later
            /// ones (a window algorithm's, see ``Core::gives_back_anywhere``):
            /// else only the latest is, and ``acquire_async`` moves waiters up.
            fn _gives_back_anywhere(slf: &Bound<'_, Self>) -> bool {
                let shared = <Self as $crate::shared::Subject>::shared(slf.get());
                $crate::shared::Core::gives_back_anywhere(&*shared.lock(slf.py()))
            }

            /// Whether ``acquire_async``'s waiters behind a cancelled one move
            /// up into its slot (see ``Core::moves_up``): a GCRA's or a leaky
            /// bucket's, or a policy's of one such limit.
            fn _moves_up(slf: &Bound<'_, Self>) -> bool {
                let shared = <Self as $crate::shared::Subject>::shared(slf.get());
                $crate::shared::Core::moves_up(&*shared.lock(slf.py()))
            }

            /// Seconds from the clock's reading to ``reservation``'s slot, 0 once
            /// it has come: ``acquire`` and ``acquire_async`` wait on this clock,
            /// not on their sleeps' (``time.monotonic``, the loop's: whose timers
            /// may fire early, uvloop's count in ms), which a ``clock=`` may lag.
            fn _left(
                slf: &Bound<'_, Self>,
                reservation: &Bound<'_, $crate::decision::PyReservation>,
            ) -> PyResult<f64> {
                let shared = <Self as $crate::shared::Subject>::shared(slf.get());
                let now = shared.now(slf.py(), None)?;
                Ok(reservation.get().left(now).as_secs_f64())
            }

            /// The floor of a method call, for the benchmark: takes ``try_acquire``'s
            /// arguments and does nothing.
            #[pyo3(signature = ($($target = None,)? cost = None, now = None))]
            fn _noop(
                &self,
                $($target: Option<&Bound<'_, PyAny>>,)?
                cost: Option<&Bound<'_, PyAny>>,
                now: Option<&Bound<'_, PyAny>>,
            ) {
                let _ = ($($target,)? cost, now);
            }

            $(
            #[doc = $reclaim]
            #[pyo3(signature = (now = None))]
            fn reclaim(
                &self,
                py: Python<'_>,
                #[pyo3(from_py_with = $crate::convert::now)] now: Option<::ratekeeper::Nanos>,
            ) -> PyResult<()> {
                let now = $crate::shared::Subject::shared(self).now(py, now)?;
                $crate::shared::Subject::shared(self).lock(py).reclaim(now);
                Ok(())
            }
            )?

            $(
            /// The HTTP RateLimit header values of ``decision``, as a dict.
            ///
            /// ``RateLimit-Policy`` (``"name";q=<limit>;w=<window>``) and
            /// ``RateLimit`` (``"name";r=<remaining>;t=<reset>``) always, and
            /// ``Retry-After`` (seconds) when the decision is a denial, following
            /// the IETF RateLimit header fields draft and RFC 9110. Seconds are
            /// whole and rounded up, so a client that waits what they say is never
            #[doc = concat!("early. ``name`` is ", $headers, " name, ``w`` its ``window``.")]
            fn headers<'py>(
                &self,
                py: Python<'py>,
                decision: &Bound<'py, PyAny>,
            ) -> PyResult<Bound<'py, ::pyo3::types::PyDict>> {
                let decision = decision.cast::<$crate::decision::PyDecision>().map_err(|_| {
                    let wrong = ::ratekeeper::Error::InvalidType { name: "decision", expected: "a Decision" };
                    $crate::errors::to_py(py, wrong)
                })?;
                // A policy's decision has several limits' numbers: put under
                // this one's name and window, they made up headers, where
                // the policy refuses a limiter's decision. A RedisPolicy's is
                // a Decision made in Python: told, as in JS, by what it holds.
                let policys = decision.is_instance_of::<$crate::decision::PyPolicyDecision>()
                    || decision.hasattr(::pyo3::intern!(py, "denied_by"))?;
                if policys {
                    let wrong = ::ratekeeper::Error::InvalidType {
                        name: "decision",
                        expected: "a limiter's Decision, not a policy's (policy.headers takes that)",
                    };
                    return Err($crate::errors::to_py(py, wrong));
                }
                self.headers_of(py, &decision.get().decision())
            }
            )?

            $($extra)*
        ],
            decide(try_acquire, [$($try_doc),*])
            decide(peek, [concat!("The ", $answer, " ``try_acquire`` would give, consuming nothing.")])
            wait(acquire_async, "acquire_async", ["``acquire`` for asyncio: ``await acquire_async(...)``.",
                "", "Books when first awaited and sleeps with ``asyncio.sleep``, so the",
                "event loop keeps running; waiters are served in booking order. It",
                "sleeps again until its slot has come on the limiter's clock (as",
                "``acquire`` does): a clock standing still keeps it waiting until its",
                "task is cancelled. A wait longer than ``timeout`` (booked, on the",
                "limiter's clock) raises ``RateLimited`` at once, booking nothing;",
                "once booked, the call waits for its slot. Cancelling the task (or",
                "any exception during the wait) gives the booking back. Arguments'",
                "types and ranges are checked when called; a cost above the limit",
                "is found by the booking, when awaited (a policy's limits depend on",
                "the request)."])
            wait(acquiring, "Acquiring", ["``acquire`` as a context manager and decorator, for sync and async code.",
                "", "``with x.acquiring(...):`` and ``async with x.acquiring(...):``",
                "acquire before the block; ``@x.acquiring(...)`` acquires before",
                "every call of the decorated function (``acquire_async`` for a",
                "coroutine function). ``timeout`` is ``acquire``'s: ``timeout=0``",
                "never waits and raises ``RateLimited`` at once on a \"no\". Leaving",
                "the block gives nothing back: the units were used."])
        );
    };
    // One method of a pair deciding with `Core::$method`.
    (
        @step $hash:tt $pymethods:tt $class:ty,
        [$($target:ident $(= $default:ident)?: $tty:ty = $convert:path)?], [$($done:tt)*],
        decide($method:ident, [$($doc:expr),*]) $($rest:tt)*
    ) => {
        limiter_methods!(@step $hash $pymethods $class, [$($target $(= $default)?: $tty = $convert)?], [
            $($done)*
            $(#[doc = $doc])*
            #[pyo3(signature = ($($target $(= $default)?,)? cost = 1, now = None))]
            fn $method<'py>(
                slf: &Bound<'py, Self>,
                $($target: Option<&Bound<'py, PyAny>>,)?
                #[pyo3(from_py_with = $crate::convert::cost)] cost: u64,
                #[pyo3(from_py_with = $crate::convert::moment)] now: Option<$crate::convert::Now>,
            ) -> PyResult<Bound<'py, $crate::decision::PyDecision>> {
                // Converted here, not by `from_py_with` (see `Held`).
                $(
                    let none = ::pyo3::types::PyNone::get(slf.py());
                    let mut held = Default::default();
                    let obj = $target.unwrap_or(none.as_any());
                    let $target = <$tty as $crate::convert::Held>::hold(obj, &mut held)?;
                )?
                let target = limiter_methods!(@held $($target)?);
                $crate::shared::decide(slf, now, target, |core, target, now| $crate::shared::Core::$method(core, target, now, cost))
            }
        ], $($rest)*);
    };
    // One method of a pair handing over to the Python helper `$helper`.
    (
        @step $hash:tt $pymethods:tt $class:ty,
        [$($target:ident $(= $default:ident)?: $tty:ty = $convert:path)?], [$($done:tt)*],
        wait($method:ident, $helper:literal, [$($doc:expr),*]) $($rest:tt)*
    ) => {
        limiter_methods!(@step $hash $pymethods $class, [$($target $(= $default)?: $tty = $convert)?], [
            $($done)*
            $(#[doc = $doc])*
            #[pyo3(signature = ($($target $(= $default)?,)? cost = 1, timeout = None))]
            fn $method<'py>(
                slf: &Bound<'py, Self>,
                $($target: Option<&Bound<'py, PyAny>>,)?
                #[pyo3(from_py_with = $crate::convert::cost)] cost: u64,
                timeout: Option<&Bound<'py, PyAny>>,
            ) -> PyResult<Bound<'py, PyAny>> {
                $(
                    let $target = $target.cloned().unwrap_or_else(|| slf.py().None().into_bound(slf.py()));
                    $convert(&$target)?;
                )?
                let args = ::pyo3::types::PyTuple::new(slf.py(), [$($target.clone(),)? cost.into_pyobject(slf.py())?.into_any()])?;
                $crate::shared::wait_helper(slf.as_any(), ::pyo3::intern!(slf.py(), $helper), args, timeout)
            }
        ], $($rest)*);
    };
    // Every method written: the impl.
    (@step $hash:tt $pymethods:tt $class:ty, $spec:tt, [$($done:tt)*], ) => {
        $hash $pymethods
        impl $class {
            $($done)*
        }
    };
    (@target) => { &() };
    (@value) => { () };
    (@value $target:ident) => { $target };
    (@of $value:ident) => { { let _ = $value; &() } };
    (@of $value:ident $target:ident) => { ::core::convert::AsRef::as_ref($value) };
    (@held) => { &() };
    (@held $target:ident) => { $target };
    (@target $target:ident) => { ::core::convert::AsRef::as_ref(&$target) };
}

pub(crate) use limiter_methods;
