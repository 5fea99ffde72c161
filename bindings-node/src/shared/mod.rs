//! What the two JS bindings (napi here, wasm-bindgen in `bindings-wasm`, which
//! includes this very folder with `#[path]`) have in common: reading
//! constructor options ([`options`]), the operations with JS numbers on a
//! limiter ([`limiter`]), a keyed limiter ([`keyed`]) and a policy
//! ([`policy`], its requests in [`request`]), the numbers' conversions and
//! the decision layout the JS layer reads ([`numbers`]), and the JS spelling
//! of argument names in error messages ([`names`]).
//!
//! Nothing here touches a JS engine: each binding reads JS values through
//! [`JsValueIn`] and turns a [`Failure`] into its own exception, so every
//! rule is written once. The bindings call everything as `shared::name`.

mod keyed;
mod limiter;
mod names;
mod numbers;
mod options;
mod policy;
mod request;

pub use self::{keyed::*, limiter::*, names::*, numbers::*, options::*, policy::*, request::*};

use ratekeeper::{Error, Nanos};

/// Where a decision (or a reservation) is written for the JS layer to read:
/// one `Float64Array` of four numbers per thread, so that no result object is
/// created on the native side.
///
/// Decision: `[remaining, limit, retryAfterMs, resetAfterMs]`, `allowed` being
/// the return value. Granted reservation: `[waitMs, atMs, slotHigh, slotLow]`
/// (see [`booked`]).
pub type Out = [f64; 4];

/// A failure: a core error (bad value), a policy configuration of the wrong
/// shape, or an exception the JS engine raised while a value was read (a
/// throwing getter).
pub enum Failure<J> {
    /// To be thrown as a `RangeError` or `TypeError` carrying `.code`.
    Core(Error),
    /// To be thrown as a `TypeError` with code `invalid_config` and this
    /// message (see [`crate::policy_config`]).
    Config(String),
    /// A core error (its class and code) in other words: this message,
    /// which names the argument.
    Worded(Error, String),
    /// Already a JS exception: rethrown as is.
    Js(J),
}

impl<J> From<Error> for Failure<J> {
    fn from(error: Error) -> Self {
        Failure::Core(error)
    }
}

/// What a JS value is, as far as the options need to know.
pub enum Kind {
    /// `undefined` or `null`: not given.
    Absent,
    /// A number (any, NaN included; the core judges its value).
    Number(f64),
    /// A string.
    String(String),
    /// An array (for `bandwidths`), with its length.
    Array(u32),
    /// Any other object.
    Object,
    /// A BigInt from 0 to 2^64 - 1: a policy configuration's count written
    /// in digits past 2^53 - 1, which the JS layer passes exactly (see
    /// `serdeReading` in lib/api/config.cjs).
    Whole(u64),
    /// Anything else (boolean, another bigint, symbol, function).
    Other,
}

/// A JS value as each binding reads it.
pub trait JsValueIn: Sized {
    /// The binding's JS exception.
    type Js;
    /// What the value is.
    fn kind(&self) -> Result<Kind, Failure<Self::Js>>;
    /// Property `key` of an object.
    fn get(&self, key: &'static str) -> Result<Self, Failure<Self::Js>>;
    /// Element `index` of an array.
    fn at(&self, index: u32) -> Result<Self, Failure<Self::Js>>;
    /// The names of an object's enumerable string-keyed properties.
    fn keys(&self) -> Result<Vec<String>, Failure<Self::Js>>;
}

/// What `tryAcquire`, `peek` and `reserve` answer: yes or no, and the numbers
/// for the scratch; the error as each build keeps it (`Failed`: boxed in
/// the napi build, see there).
pub type Answer = Result<(bool, Out), crate::Failed>;

/// The time of a decision: `nowMs` from JS, or a reading of the native
/// clock (the napi build's default clock, see `bindings-node/src/clock.rs`).
#[derive(Clone, Copy)]
pub enum Now {
    /// Milliseconds, as JS gave them.
    Millis(f64),
    /// Nanoseconds, as the native clock read them.
    #[allow(dead_code)] // the wasm crate, which includes this file, has no native clock
    Read(Nanos),
}

impl Now {
    #[inline]
    fn nanos(self) -> Result<Nanos, Error> {
        match self {
            Now::Millis(ms) => millis(ms, "now"),
            Now::Read(nanos) => Ok(nanos),
        }
    }
}

/// What a keyed or policy operation does: see [`keyed_op`] and [`policy_op`].
pub const PEEK: u32 = 0;
/// `tryAcquire`.
pub const TRY_ACQUIRE: u32 = 1;
/// `reserve`.
pub const RESERVE: u32 = 2;
