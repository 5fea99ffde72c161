//! The JS spelling of argument names, and the errors the JS layer words
//! itself: `TypeError`s of arguments it checks.

use ratekeeper::Error;

#[cfg_attr(ratekeeper_size, optimize(size))]
pub(super) fn invalid_type(name: &'static str, expected: &'static str) -> Error {
    Error::InvalidType { name, expected }
}

/// The JS spelling of a core (Rust) argument name, as error messages and
/// option keys use it.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn js_name(rust: &'static str) -> &'static str {
    match rust {
        "refill_tokens" => "refillTokens",
        "refill_period" => "refillPeriodMs",
        "initial_tokens" => "initialTokens",
        "emission_interval" => "emissionIntervalMs",
        "period" => "periodMs",
        "interval" => "intervalMs",
        "window" => "windowMs",
        "now" => "nowMs",
        "max_wait" => "maxWaitMs",
        "taken_at" => "takenAtMs",
        "timeout" => "timeoutMs",
        "max_keys" => "maxKeys",
        // `AnyLimiter::reconfigure(now, new)`: the JS method calls it `other`.
        "new" => "other",
        // Encoded state: `restore(bytes)`, `fromBytes(bytes, options)`.
        "state" => "bytes",
        // capacity, burst, tokens, limit, cost, bandwidths, refill, name, and
        // the binding's own options, clock, signal, decision read the same.
        other => other,
    }
}

/// The message of `error` with its argument in JS spelling, whether it is a
/// `TypeError` (else a `RangeError`), and its code.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn describe_error(error: &Error) -> (String, bool, &'static str) {
    let message = match error.argument() {
        Some(rust) => error.display_with(js_name(rust)).to_string(),
        None => error.to_string(),
    };
    describe_worded(error, message)
}

/// [`describe_error`] with `message` in place of the core's words.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn describe_worded(error: &Error, message: String) -> (String, bool, &'static str) {
    (
        message,
        matches!(error, Error::InvalidType { .. }),
        error.code(),
    )
}

/// The names of the arguments the JS layer checks itself, so that its errors
/// can hold `&'static str`s like the core's.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub(super) fn static_name(name: &str) -> &'static str {
    const NAMES: &[&str] = &[
        "cost",
        "now",
        "max_wait",
        "taken_at",
        "timeout",
        "name",
        "clock",
        "signal",
        "options",
        "other",
        "decision",
        "key",
        "create",
        "handle",
        "limiter",
        "request",
        "fields",
        "rates",
        "config",
        "state",
        "costs",
        "algorithm",
        "by",
        "eviction",
        "max_keys",
        "bandwidths",
        "skip",
    ];
    NAMES
        .iter()
        .find(|n| **n == name)
        .copied()
        .unwrap_or("value")
}

/// The `invalid_type` error for an argument the JS layer checked, given its
/// Rust name and what it should be.
#[cfg_attr(ratekeeper_size, optimize(size))]
pub fn type_error(name: &str, expected: &str) -> Error {
    const EXPECTED: &[&str] = &[
        "a number",
        "a string",
        "a function",
        "an object",
        "an AbortSignal",
        "a limiter",
        "a limiter or a KeyedLimiter",
        "a decision",
        "a string, a number or a Uint8Array",
        "a function returning a limiter",
        "a Uint8Array",
        "an array of numbers",
        "an array of strings",
        "a KeyedLimiter or a Policy",
        "an object or a string",
        "an object of strings, numbers and Uint8Arrays",
        "an array of objects",
    ];
    let expected = EXPECTED
        .iter()
        .find(|e| **e == expected)
        .copied()
        .unwrap_or("of another type");
    invalid_type(static_name(name), expected)
}
