//! The server-side half of distributed limits on Redis: a Lua script, as text.
//!
//! The core does no I/O; this module only carries the script every binding
//! ships in its binary, so that each client sends the same bytes (and hence
//! the same `EVALSHA` digest). The script decides every limit of one request
//! in one atomic call, exactly as the core's `Policy` would,
//! in integer **microseconds since the Unix epoch** (the wire unit), so that
//! every value stays an exact integer in Lua's doubles (below 2^53).
//!
//! # Protocol, version 1
//!
//! `EVALSHA <sha1(REDIS_SCRIPT)> <n> KEYS... ARGV...`, loading it with
//! `SCRIPT LOAD` on a `NOSCRIPT` error:
//!
//! - `KEYS`: one key per limit, all sharing one hash tag `{...}` (one slot on
//!   Redis Cluster). Each holds the limit's state (a short string, or a
//!   sorted set for a log), expiring when the state is back to fresh (a
//!   fresh state is deleted instead: an absent key is a fresh limiter). On
//!   the server's clock that is at `now + reset_after` (`PXAT`); on the
//!   caller's, `reset_after` plus a second later on the server's clock, and
//!   never before `now + reset_after` read as Unix time (see PROTOCOL.md).
//! - `ARGV`: `"1"` (the protocol version), the mode (`"acquire"`, `"peek"`,
//!   `"reserve"` or `"refund"`), `now` in µs or `""` for the server's `TIME`, the number of
//!   limits `n`, then each limit's configuration:
//!   `"gcra", burst, interval`;
//!   `"token_bucket", bands, (capacity, refill_tokens, refill_period) * bands`
//!   (greedy refill, starting full);
//!   `"fixed_window", limit, window`;
//!   `"sliding_window_counter", limit, window`;
//!   `"sliding_window_log", limit, window` (a sorted set; durations in µs); then the
//!   number of costs `m` and the costs, applied in order (a batch); for
//!   `"refund"`, then `taken_at` in µs (`""`: now), optionally the marks and
//!   births a reply gave; for `"reserve"` (one cost), then `max_wait` in µs;
//!   for `"acquire"` and `"peek"`, optionally `"text"` (the reply as one
//!   string); for `"acquire"` (after `"text"` or `""`) and `"reserve"`,
//!   optionally a random nonce in `[1, 2^53)`, the birth of a key the call
//!   writes first where the script may not call `TIME`.
//! - Reply: `now` (µs, the time decided at), then per cost `6 + 5 * n`
//!   integers (6 when `n` is 1): `allowed` (0/1), `denied_by` (the denying
//!   limit's 1-based index with the longest `retry_after`, 0 when allowed),
//!   the combined `remaining`, `limit`, `retry_after`, `reset_after` (µs),
//!   then, when `n > 1`, for each limit its own `allowed, remaining, limit,
//!   retry_after, reset_after` (a lone limit's is the combined answer);
//!   `"acquire"` then each limit's mark (a count, then that many integers),
//!   then each key's birth (the server's `TIME` when the key was written
//!   first; on the callers' clock where the script may not call `TIME`,
//!   that call's nonce, or its `now` plus 1 without one). `"refund"` replies `[now]`; `"reserve"` replies `now, booked (0/1),
//!   wait`, then the decision at `now` as above, then each limit's mark and
//!   each key's birth. A `"refund"` given the marks of the call that took
//!   its units gives a bucket back only while its key's mark is still that
//!   call's, and given their births, gives a key back only while its birth
//!   is still that one: never to a key reset (by any process) or expired
//!   since (see PROTOCOL.md, "Guarded refund").
//!
//! A request is allowed only if every limit allows it; a denial writes no
//! state anywhere (it may lengthen a key's expiry, to when the state it
//! holds is fresh: see PROTOCOL.md, Memory), and a limit that would have
//! allowed reports its answer for a cost of 0. Clients validate configurations so that every product
//! stays below 2^53: the rules are in `core/redis/PROTOCOL.md`.

/// The Lua script that decides a request against every limit of a policy in
/// one atomic call (protocol version 1, described in the module docs).
pub const REDIS_SCRIPT: &str = include_str!("../redis/ratekeeper.lua");

/// The protocol version the script speaks: the first argument of every call.
pub const REDIS_PROTOCOL_VERSION: u32 = 1;

/// The wire unit of time: microseconds, this many per second.
pub const REDIS_MICROS_PER_SECOND: u64 = 1_000_000;

/// The largest value a client may let any time, duration or product of the
/// protocol reach: 2^51, so that sums of a few of them stay exact in Lua's
/// doubles (integers are exact below 2^53).
pub const REDIS_MAX_EXACT: u64 = 1 << 51;

/// The longest window and the longest `max_wait` a client may send: 2^50 µs
/// (35 years), so that a booked slot plus two windows stays exact while `now`
/// is at most 2^52 µs (the year 2112).
pub const REDIS_MAX_SPAN: u64 = 1 << 50;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_states_its_protocol_version() {
        assert!(REDIS_SCRIPT.contains("ARGV[1] ~= '1'"));
        assert_eq!(REDIS_PROTOCOL_VERSION, 1);
    }
}
