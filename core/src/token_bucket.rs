//! The lazy-refill token bucket, with one or several bandwidths.

use crate::bandwidth::Band;
#[cfg(feature = "alloc")]
use crate::keyed::Keyed;
use crate::limiter::check_cost;
use crate::state::codec::{corrupt, Codec, Fingerprint, Reader, Writer};
use crate::{Bandwidth, Decision, Error, Limiter, Nanos};

/// A token bucket that refills lazily, with exact integer arithmetic, under
/// one or several bandwidths at once.
///
/// Each [`Bandwidth`] holds at most `capacity` tokens and gains
/// `refill_tokens` every `refill_period`: continuously (after `t` ns,
/// `refill_tokens * t / refill_period` tokens, the fraction carried to the
/// next call, so no rate drifts: 3 tokens per microsecond admit exactly 3,000
/// per millisecond) or, for [`Bandwidth::interval`], all at once at the end of
/// each period. A request of `cost` is allowed when every bandwidth holds at
/// least `cost` tokens, and then takes them from every bandwidth; a denial
/// takes from none.
///
/// **Guarantee.** For each bandwidth, in any span of time of length `t`, the
/// bucket admits at most `capacity + floor(refill_tokens * t / refill_period)`
/// units (interval refill: `capacity + min(refill_tokens, capacity) *
/// ceil((t - 1 ns) / refill_period)`, a whole refill at each period end
/// after the span's first instant, so up to `2 * capacity` across one end):
/// a burst of up to `capacity` at once, then the rate.
///
/// A new bucket holds each bandwidth's `initial_tokens` (by default its
/// capacity) at the time of its first call that changes it (a
/// [`peek`](Limiter::peek) does not start it: see there). `TokenBucket` (that is,
/// `TokenBucket<1>`) has one bandwidth; `TokenBucket<N>` has `N`.
///
/// ```
/// use ratekeeper::{Bandwidth, Limiter, Nanos, TokenBucket};
///
/// // Burst of 2, then 1 per 500 ms.
/// let mut bucket = TokenBucket::new(2, 1, Nanos::from_millis(500)).unwrap();
/// assert!(bucket.try_acquire(Nanos::ZERO, 2).unwrap().allowed);
/// let denied = bucket.try_acquire(Nanos::from_millis(100), 1).unwrap();
/// assert_eq!(denied.retry_after, Nanos::from_millis(400));
/// assert!(bucket.try_acquire(Nanos::from_millis(500), 1).unwrap().allowed);
///
/// // 2 per second AND 3 per minute (1 per 20 s, burst 3).
/// let mut both = TokenBucket::from_bandwidths([
///     Bandwidth::greedy(2, 2, Nanos::from_secs(1)).unwrap(),
///     Bandwidth::greedy(3, 3, Nanos::from_secs(60)).unwrap(),
/// ]).unwrap();
/// assert!(both.try_acquire(Nanos::ZERO, 2).unwrap().allowed);        // minute: 3 -> 1
/// assert!(both.try_acquire(Nanos::from_secs(1), 1).unwrap().allowed); // minute: 1.05 -> 0.05
/// let denied = both.try_acquire(Nanos::from_secs(2), 1).unwrap();     // minute: 0.1
/// assert_eq!(denied.retry_after, Nanos::from_secs(18));                // 0.9 token at 1 per 20 s
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenBucket<const N: usize = 1> {
    /// The rules, apart from the state: a decision reads them and copies
    /// only the 24-byte states.
    rules: [Bandwidth; N],
    bands: [Band; N],
    /// The time the bands' state refers to; `None` until the first call.
    updated: Option<Nanos>,
}

/// How a decision computes each band.
trait Arithmetic {
    /// Whether this arithmetic decides at a time before the bucket's own
    /// (time gone backwards), when every wait grows by the difference.
    const LAGS: bool;
    /// Whether this arithmetic computes `band` at all, asked of every band
    /// before anything else.
    fn computes(band: &Band, rule: &Bandwidth) -> bool;
    /// [`Band::advanced`], or `None` where this arithmetic declines.
    fn advanced(band: Band, rule: &Bandwidth, elapsed: u64) -> Option<Band>;
    /// [`Band::wait_for`].
    fn wait_for(band: &Band, rule: &Bandwidth, target: u64) -> u64;
    /// Whether `band` can pay `cost` ([`Band::holds`], and a cost of zero
    /// always can).
    fn holds(band: &Band, cost: u64) -> bool;
}

/// Every case, in 128 bits with divisions where needed; never declines.
enum Exact {}

impl Arithmetic for Exact {
    const LAGS: bool = true;

    #[inline]
    fn computes(_: &Band, _: &Bandwidth) -> bool {
        true
    }

    #[inline]
    fn advanced(band: Band, rule: &Bandwidth, elapsed: u64) -> Option<Band> {
        Some(band.advanced(rule, elapsed))
    }

    #[inline]
    fn wait_for(band: &Band, rule: &Bandwidth, target: u64) -> u64 {
        band.wait_for(rule, target)
    }

    #[inline]
    fn holds(band: &Band, cost: u64) -> bool {
        cost == 0 || band.holds(cost)
    }
}

/// The cases a bucket meets on almost every call (quick bands, see
/// [`Band::is_quick`], greedy ones gaining any number of tokens (at most
/// one on wasm), interval ones within a period; time not gone backwards),
/// in 64-bit registers without a division instruction or a call, so that a
/// decision inlines into the caller's loop. It declines the rest, which
/// [`Exact`] then decides from scratch.
enum Quick {}

impl Arithmetic for Quick {
    const LAGS: bool = false;

    #[inline(always)]
    fn computes(band: &Band, rule: &Bandwidth) -> bool {
        band.is_quick(rule)
    }

    #[inline(always)]
    fn advanced(band: Band, rule: &Bandwidth, elapsed: u64) -> Option<Band> {
        band.advanced_quick(rule, elapsed)
    }

    #[inline(always)]
    fn wait_for(band: &Band, rule: &Bandwidth, target: u64) -> u64 {
        band.wait_for_quick(rule, target)
    }

    /// A quick band owes nothing: its tokens are all there.
    #[inline(always)]
    fn holds(band: &Band, cost: u64) -> bool {
        band.tokens >= cost
    }
}

/// The answer of an [`Exact`] computation, which always has one.
fn exact<T>(answer: Option<T>) -> T {
    answer.expect("exact arithmetic answers every case")
}

/// A [`Decision`]'s fields, in order: what the cold path hands back as
/// plain values (see [`TokenBucket::acquire_exact`]).
type DecisionFields = (bool, u64, u64, Nanos, Nanos);

/// The bucket as of some time, computed without changing it.
struct Level<const N: usize> {
    bands: [Band; N],
    at: Nanos,
    /// How far `now` lies before the bucket's own time (time went backwards).
    lag: u64,
    /// Whether `at` is later than the bucket's own time (or the bucket has
    /// not been called yet). When it is not, a denial leaves the bucket as
    /// it was and need not be written back.
    moved: bool,
}

impl TokenBucket<1> {
    /// A full bucket of `capacity` tokens gaining `refill_tokens` every
    /// `refill_period`, continuously.
    ///
    /// Fails when a value is zero, or when refilling the whole capacity would
    /// take longer than [`Nanos::MAX`].
    pub fn new(capacity: u64, refill_tokens: u64, refill_period: Nanos) -> Result<Self, Error> {
        Self::from_bandwidths([Bandwidth::greedy(capacity, refill_tokens, refill_period)?])
    }

    /// Like [`TokenBucket::new`], holding `initial_tokens` at its first call.
    ///
    /// Fails also when `initial_tokens` exceeds `capacity`.
    pub fn with_initial_tokens(
        capacity: u64,
        refill_tokens: u64,
        refill_period: Nanos,
        initial_tokens: u64,
    ) -> Result<Self, Error> {
        let rule = Bandwidth::greedy(capacity, refill_tokens, refill_period)?;
        Self::from_bandwidths([rule.with_initial_tokens(initial_tokens)?])
    }

    /// The most tokens the bucket holds.
    pub fn capacity(&self) -> u64 {
        self.rules[0].capacity()
    }

    /// Tokens gained every [`refill_period`](Self::refill_period).
    pub fn refill_tokens(&self) -> u64 {
        self.rules[0].refill_tokens()
    }

    /// The period over which [`refill_tokens`](Self::refill_tokens) are gained.
    pub fn refill_period(&self) -> Nanos {
        self.rules[0].refill_period()
    }
}

impl<const N: usize> TokenBucket<N> {
    /// This configuration, never called: its bands as they start.
    pub(crate) fn fresh(&self) -> Self {
        Self::starting(self.rules)
    }

    fn starting(rules: [Bandwidth; N]) -> Self {
        TokenBucket {
            bands: rules.each_ref().map(Band::new),
            rules,
            updated: None,
        }
    }

    /// A bucket that must satisfy every one of `bandwidths`.
    ///
    /// Fails when `N` is zero.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn from_bandwidths(bandwidths: [Bandwidth; N]) -> Result<Self, Error> {
        if N == 0 {
            return Err(Error::ZeroValue { name: "bandwidths" });
        }
        Ok(Self::starting(bandwidths))
    }

    /// The bandwidths this bucket enforces.
    pub fn bandwidths(&self) -> [Bandwidth; N] {
        self.rules
    }

    /// Replaces the bandwidths of a live bucket with those of `new`.
    ///
    /// State carries over band by band: whole tokens (capped at the new
    /// capacity) and tokens owed to reservations are kept; a partial token,
    /// or the time into the current interval, restarts at `now`. A bucket
    /// that has never been called becomes `new` as built (only the
    /// configuration of `new` is used, never its state).
    #[cfg_attr(ratekeeper_size, optimize(size))]
    pub fn reconfigure(&mut self, now: Nanos, new: TokenBucket<N>) {
        if self.updated.is_none() {
            *self = new.fresh();
            return;
        }
        let at = reconfigured(&self.rules, &mut self.bands, self.updated, now, &new.rules);
        self.rules = new.rules;
        self.updated = Some(at);
    }

    /// The bucket as of `now` in exact arithmetic, which always answers:
    /// through one copy of it for every number of bandwidths
    /// ([`level_exact`]).
    fn level_exact(&self, now: Nanos) -> Level<N> {
        let mut bands = self.bands;
        let Moment { at, lag, moved } = level_exact(&self.rules, &mut bands, self.updated, now);
        Level {
            bands,
            at,
            lag,
            moved,
        }
    }

    /// Stores `level` as the bucket's state, unless it is the state already.
    #[inline]
    fn commit(&mut self, level: &Level<N>, taken: bool) {
        if level.moved | taken {
            self.bands = level.bands;
            self.updated = Some(level.at);
        }
    }

    /// [`TokenBucket::commit`] of a level the quick arithmetic computed:
    /// only what it changes is written (each band's tokens and carry, not
    /// its debt; the time, not whether there is one once there is), since
    /// stores were what bounded an allowed decision (3.3 ns before, 2.5 to
    /// 2.8 after, on the machine of `benches/decisions.rs`).
    #[inline(always)]
    fn commit_quick(&mut self, level: &Level<N>, taken: bool) {
        if level.moved | taken {
            for (band, new) in self.bands.iter_mut().zip(&level.bands) {
                band.set_quick(new);
            }
            match &mut self.updated {
                Some(updated) => *updated = level.at,
                None => self.updated = Some(level.at),
            }
        }
    }

    /// The decision for `cost` at `now`, which the caller has checked
    /// against the limit, and the bucket's state after it; `None` where `A`
    /// declines.
    #[inline(always)]
    fn decide_with<A: Arithmetic>(&self, now: Nanos, cost: u64) -> Option<(Decision, Level<N>)> {
        let mut bands = self.bands;
        let (decision, Moment { at, lag, moved }) =
            decide_in::<A>(&self.rules, &mut bands, self.updated, now, cost)?;
        let level = Level {
            bands,
            at,
            lag,
            moved,
        };
        Some((decision, level))
    }

    /// [`TokenBucket::decide_with`] in every case.
    #[inline]
    fn decide(&self, now: Nanos, cost: u64) -> (Decision, Level<N>) {
        exact(self.decide_with::<Exact>(now, cost))
    }

    /// [`Limiter::try_acquire`] in every case, once the cost is checked:
    /// the bucket's state after it, and the decision's fields, in order.
    /// Cold, so that the quick path is laid out straight, without taken
    /// jumps; by value, so that the caller's bucket need not be in memory
    /// for its address (a keyed store's copy of a key's state then stays in
    /// registers, see `KeyedLimiter::apply`). The state only, not the rules:
    /// a caller's loop then never writes the rules, and LLVM keeps them in
    /// registers across its calls (a denial in `benches/decisions.rs`, 2.0
    /// ns before, 1.7 to 1.9 after, governor's 1.9).
    #[cold]
    #[inline(never)]
    fn acquire_exact(
        mut self,
        now: Nanos,
        cost: u64,
    ) -> (([Band; N], Option<Nanos>), DecisionFields) {
        let (decision, level) = self.decide(now, cost);
        self.commit(&level, decision.allowed);
        let Decision {
            allowed,
            remaining,
            limit,
            retry_after,
            reset_after,
        } = decision;
        (
            (self.bands, self.updated),
            (allowed, remaining, limit, retry_after, reset_after),
        )
    }
}

/// When a level of the bands stands (see [`Level`]): computed over slices
/// of the bands, whatever their number.
struct Moment {
    at: Nanos,
    lag: u64,
    moved: bool,
}

/// The bucket of `rules`, whose bands were `bands` at `updated`, as of
/// `now`, or `None` where `A` declines: `bands` then holds the level's
/// bands (on `None`, anything: the caller's are a copy).
#[inline(always)]
fn level_in<A: Arithmetic>(
    rules: &[Bandwidth],
    bands: &mut [Band],
    updated: Option<Nanos>,
    now: Nanos,
) -> Option<Moment> {
    for (band, rule) in bands.iter().zip(rules) {
        if !A::computes(band, rule) {
            return None;
        }
    }
    Some(match updated {
        Some(updated) if now <= updated => {
            if !A::LAGS && now < updated {
                return None;
            }
            Moment {
                at: updated,
                // Spelled out as zero otherwise, so that every wait's
                // addition of it folds away.
                lag: if A::LAGS { updated.0 - now.0 } else { 0 },
                moved: false,
            }
        }
        Some(updated) => {
            let elapsed = now.0 - updated.0;
            for (band, rule) in bands.iter_mut().zip(rules) {
                *band = A::advanced(*band, rule, elapsed)?;
            }
            Moment {
                at: now,
                lag: 0,
                moved: true,
            }
        }
        None => Moment {
            at: now,
            lag: 0,
            moved: true,
        },
    })
}

/// The longest wait, over all bands, until each holds `target` tokens
/// (`None` for full), plus `lag`, saturating at [`Nanos::MAX`].
#[inline(always)]
fn wait_in<A: Arithmetic>(
    rules: &[Bandwidth],
    bands: &[Band],
    lag: u64,
    target: Option<u64>,
) -> Nanos {
    let mut longest = 0;
    for (band, rule) in bands.iter().zip(rules) {
        longest = longest.max(A::wait_for(band, rule, target.unwrap_or(rule.capacity())));
    }
    // No wait stays no wait, whatever the lag.
    let lag = if longest == 0 { 0 } else { lag };
    Nanos(longest.saturating_add(lag))
}

/// The decision for `cost` at `now` (see [`TokenBucket::decide_with`]),
/// `bands` becoming the level's as in [`level_in`]; `None` where `A`
/// declines.
#[inline(always)]
fn decide_in<A: Arithmetic>(
    rules: &[Bandwidth],
    bands: &mut [Band],
    updated: Option<Nanos>,
    now: Nanos,
    cost: u64,
) -> Option<(Decision, Moment)> {
    let moment = level_in::<A>(rules, bands, updated, now)?;
    let allowed = bands.iter().all(|band| A::holds(band, cost));
    if allowed {
        for band in bands.iter_mut() {
            *band = band.taken(cost);
        }
    }
    let retry_after = if allowed {
        Nanos::ZERO
    } else {
        wait_in::<A>(rules, bands, moment.lag, Some(cost))
    };
    let decision = Decision {
        allowed,
        remaining: bands.iter().map(|band| band.tokens).min().unwrap_or(0),
        limit: rules.iter().map(|rule| rule.capacity()).min().unwrap_or(0),
        retry_after,
        reset_after: wait_in::<A>(rules, bands, moment.lag, None),
    };
    Some((decision, moment))
}

/// [`level_in`] in exact arithmetic, compiled once for every number of
/// bandwidths.
#[inline(never)]
#[cfg_attr(ratekeeper_size, optimize(size))]
fn level_exact(
    rules: &[Bandwidth],
    bands: &mut [Band],
    updated: Option<Nanos>,
    now: Nanos,
) -> Moment {
    exact(level_in::<Exact>(rules, bands, updated, now))
}

/// What a [`KeyedLimiter`](crate::KeyedLimiter) keeps per key of a token
/// bucket: the bands' state and its time, 24 bytes per band and 16 more,
/// without the rules, which the store keeps once.
#[cfg(feature = "alloc")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketState<const N: usize> {
    bands: [Band; N],
    updated: Option<Nanos>,
}

#[cfg(feature = "alloc")]
impl<const N: usize> crate::keyed::sealed::Sealed for TokenBucket<N> {}

#[cfg(feature = "alloc")]
impl<const N: usize> Keyed for TokenBucket<N> {
    type State = BucketState<N>;

    fn new_state(&self) -> BucketState<N> {
        let fresh = self.fresh();
        BucketState {
            bands: fresh.bands,
            updated: fresh.updated,
        }
    }

    #[inline]
    fn with_state<R>(
        &self,
        state: &mut BucketState<N>,
        _: Nanos,
        f: impl FnOnce(&mut Self) -> R,
    ) -> R {
        let mut bucket = TokenBucket {
            rules: self.rules,
            bands: state.bands,
            updated: state.updated,
        };
        let result = f(&mut bucket);
        (state.bands, state.updated) = (bucket.bands, bucket.updated);
        result
    }

    #[inline]
    fn read_state<R>(&self, state: &BucketState<N>, _: Nanos, f: impl FnOnce(&Self) -> R) -> R {
        f(&TokenBucket {
            rules: self.rules,
            bands: state.bands,
            updated: state.updated,
        })
    }
}

impl<const N: usize> Limiter for TokenBucket<N> {
    /// The smallest capacity of the bucket's bandwidths.
    #[inline]
    fn limit(&self) -> u64 {
        self.rules
            .iter()
            .map(|rule| rule.capacity())
            .min()
            .unwrap_or(0)
    }

    #[inline(always)]
    fn try_acquire(&mut self, now: Nanos, cost: u64) -> Result<Decision, Error> {
        check_cost(cost, self.limit())?;
        match self.decide_with::<Quick>(now, cost) {
            Some((decision, level)) => {
                self.commit_quick(&level, decision.allowed);
                Ok(decision)
            }
            None => {
                // Taken apart and rebuilt, so that both paths meet on plain
                // values rather than in the memory this call writes: else
                // the quick path would store its answer there too, for the
                // caller to copy it again.
                let ((bands, updated), (allowed, remaining, limit, retry_after, reset_after)) =
                    self.clone().acquire_exact(now, cost);
                (self.bands, self.updated) = (bands, updated);
                Ok(Decision {
                    allowed,
                    remaining,
                    limit,
                    retry_after,
                    reset_after,
                })
            }
        }
    }

    #[inline]
    fn peek(&self, now: Nanos, cost: u64) -> Result<Decision, Error> {
        check_cost(cost, self.limit())?;
        Ok(match self.decide_with::<Quick>(now, cost) {
            Some((decision, _)) => decision,
            None => self.decide(now, cost).0,
        })
    }

    /// Admitted when every band holds `cost` at the slot, counting the
    /// refill until then (which the capacity caps); each band then holds
    /// what it would had `cost` been taken at the slot. Refused also when
    /// the debt does not fit in 64 bits (it is computed in 128).
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn reserve_after(&mut self, now: Nanos, cost: u64, wait: Nanos) -> Result<bool, Error> {
        check_cost(cost, self.limit())?;
        let mut level = self.level_exact(now);
        self.commit(&level, false);
        if cost == 0 {
            return Ok(true);
        }
        // From the bucket's time, which is `lag` after `now`.
        let wait = wait.0.saturating_sub(level.lag);
        for (band, rule) in level.bands.iter_mut().zip(&self.rules) {
            match band.booked(rule, wait, cost) {
                Some(booked) => *band = booked,
                None => return Ok(false),
            }
        }
        self.commit(&level, true);
        Ok(true)
    }

    /// Adds `cost` tokens back to every bandwidth, paying reservations'
    /// debt first, never above capacity. The time is not used: a bucket has
    /// no history, and moving its clock to `taken_at` (which may be a
    /// reservation's future slot) would grant refill that has not happened.
    ///
    /// A returned token can be spent again, so with refunds the guarantee
    /// reads: in any span, admitted units are at most the bucket's bound plus
    /// the units refunded so far. A bucket never called has taken nothing,
    /// and takes nothing back (one starting short would gain tokens).
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn refund(&mut self, _taken_at: Nanos, cost: u64) {
        if self.updated.is_none() {
            return;
        }
        for (band, rule) in self.bands.iter_mut().zip(&self.rules) {
            band.add(rule, cost as u128);
        }
    }
}

impl<const N: usize> Codec for TokenBucket<N> {
    fn tag(&self) -> u8 {
        1
    }

    fn config(&self, fingerprint: &mut Fingerprint) {
        config_of(&self.rules, fingerprint);
    }

    fn write_state(&self, w: &mut Writer<'_>) {
        write_state_of(&self.bands, self.updated, w);
    }

    fn read_state(&mut self, r: &mut Reader<'_>) -> Result<(), Error> {
        read_state_of(&self.rules, &mut self.bands, &mut self.updated, r)
    }
}

// The state codec and `reconfigure` over slices of the bands, compiled once
// for every number of bandwidths (each number its own copy before, in the
// wasm build).

/// The number of bandwidths, then each one's configuration.
#[cfg_attr(ratekeeper_size, optimize(size))]
fn config_of(rules: &[Bandwidth], fingerprint: &mut Fingerprint) {
    fingerprint.word(rules.len() as u64);
    for rule in rules {
        rule.fingerprint(fingerprint);
    }
}

/// Whether the bucket has been called (and when), then each band.
#[cfg_attr(ratekeeper_size, optimize(size))]
fn write_state_of(bands: &[Band], updated: Option<Nanos>, w: &mut Writer<'_>) {
    match updated {
        None => w.varint(0),
        Some(at) => {
            w.varint(1);
            w.varint(at.0);
        }
    }
    for band in bands {
        band.write(w);
    }
}

/// A bucket never called holds each band as it starts (its initial
/// tokens, nothing owed): only a call changes a band, and a refund or a
/// reconfigure reads a bucket never called as new, so a state never
/// called yet spent or owing would lose its debt to them.
#[cfg_attr(ratekeeper_size, optimize(size))]
fn read_state_of(
    rules: &[Bandwidth],
    bands: &mut [Band],
    updated: &mut Option<Nanos>,
    r: &mut Reader<'_>,
) -> Result<(), Error> {
    *updated = match r.at_most(1)? {
        0 => None,
        _ => Some(Nanos(r.varint()?)),
    };
    for (band, rule) in bands.iter_mut().zip(rules) {
        *band = Band::read(rule, r)?;
        if updated.is_none() && *band != Band::new(rule) {
            return Err(corrupt(
                "a bucket never called holds other than its initial tokens",
            ));
        }
    }
    Ok(())
}

/// [`TokenBucket::reconfigure`] of a bucket called before (at `updated`):
/// `bands` become the bands under `new` as of `now`, at the time answered.
#[cfg_attr(ratekeeper_size, optimize(size))]
fn reconfigured(
    rules: &[Bandwidth],
    bands: &mut [Band],
    updated: Option<Nanos>,
    now: Nanos,
    new: &[Bandwidth],
) -> Nanos {
    let Moment { at, .. } = level_exact(rules, bands, updated, now);
    for (band, rule) in bands.iter_mut().zip(new) {
        *band = band.reconfigured(rule);
    }
    at
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::FileFailurePersistence;
    use std::boxed::Box;

    /// A bandwidth of any refill, with small numbers so that every path
    /// (debt, several tokens gained, gcd-reduced steps) comes up.
    fn rule() -> impl Strategy<Value = Bandwidth> {
        (1u64..=6, 1u64..=4, 1u64..=40, any::<bool>(), 0u64..=6).prop_map(
            |(capacity, tokens, period, interval, initial)| {
                let rule = if interval {
                    Bandwidth::interval(capacity, tokens, Nanos(period))
                } else {
                    Bandwidth::greedy(capacity, tokens, Nanos(period))
                };
                let rule = rule.unwrap();
                rule.with_initial_tokens(initial.min(capacity)).unwrap()
            },
        )
    }

    /// Asserts that the quick arithmetic, where it answers, decides exactly
    /// as the exact one and leaves the same state.
    fn assert_quick_is_exact<const N: usize>(bucket: &TokenBucket<N>, now: Nanos, cost: u64) {
        let Some((quick, quick_level)) = bucket.decide_with::<Quick>(now, cost) else {
            return;
        };
        let (exact, exact_level) = bucket.decide(now, cost);
        assert_eq!(quick, exact);
        assert_eq!(quick_level.bands, exact_level.bands);
        assert_eq!(
            (quick_level.at, quick_level.lag, quick_level.moved),
            (exact_level.at, exact_level.lag, exact_level.moved)
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 512,
            // Shrunk failures kept beside those of core/tests/.
            failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
                "proptest-regressions/token_bucket.txt",
            ))),
            ..ProptestConfig::default()
        })]

        #[test]
        fn quick_decisions_are_exact(
            rules in (rule(), rule()),
            calls in prop::collection::vec((-30i64..=90, 0u64..=3, 0u8..=5), 1..60),
        ) {
            let mut one = TokenBucket::from_bandwidths([rules.0]).unwrap();
            let mut two = TokenBucket::from_bandwidths([rules.0, rules.1]).unwrap();
            let mut t = 1_000i64;
            for (step, cost, op) in calls {
                t = (t + step).max(0);
                let now = Nanos(t as u64);
                if cost <= one.limit() {
                    assert_quick_is_exact(&one, now, cost);
                    match op {
                        0 => drop(one.reserve(now, cost, Nanos(200))),
                        1 => one.refund(now, cost),
                        _ => drop(one.try_acquire(now, cost)),
                    }
                }
                if cost <= two.limit() {
                    assert_quick_is_exact(&two, now, cost);
                    match op {
                        0 => drop(two.reserve(now, cost, Nanos(200))),
                        1 => two.refund(now, cost),
                        _ => drop(two.try_acquire(now, cost)),
                    }
                }
            }
        }

        /// The quick arithmetic stays exact after any gap, up to the end of
        /// time, from any state a bucket can hold (one restored from bytes
        /// too): a refill past 2^64 units fills the band, as the exact
        /// arithmetic finds in 128 bits.
        #[test]
        fn quick_decisions_are_exact_after_any_gap(
            rule in rule(),
            (tokens, carry, updated) in (0u64..=6, any::<u64>(), 0u64..100),
            gap in prop_oneof![any::<u64>(), u64::MAX - 100..=u64::MAX, 0u64..1_000],
            cost in 0u64..=3,
        ) {
            // A state a bucket can hold, by construction: a carry below the
            // step, none in a full greedy band.
            let tokens = tokens.min(rule.capacity());
            let full = tokens == rule.capacity() && rule.refill() == crate::Refill::Greedy;
            let carry = if full { 0 } else { carry % rule.step() };
            let band = Band::checked(&rule, tokens, 0, carry).unwrap();
            let bucket = TokenBucket {
                rules: [rule],
                bands: [band],
                updated: Some(Nanos(updated)),
            };
            let now = Nanos(updated.saturating_add(gap));
            assert_quick_is_exact(&bucket, now, cost.min(rule.capacity()));
        }
    }

    #[test]
    fn three_per_microsecond_admit_exactly_three_thousand_per_millisecond() {
        let mut bucket = TokenBucket::with_initial_tokens(3, 3, Nanos::from_micros(1), 0).unwrap();
        let mut admitted = 0;
        // Probe every 7 ns so that refills land at awkward offsets, then once
        // exactly at the end of the millisecond.
        for t in (0..1_000_000).step_by(7).chain([1_000_000]) {
            while bucket.try_acquire(Nanos(t), 1).unwrap().allowed {
                admitted += 1;
            }
        }
        assert_eq!(admitted, 3_000);
    }

    #[test]
    fn refill_overflow_is_a_configuration_error() {
        let err = TokenBucket::new(u64::MAX, 1, Nanos(2)).unwrap_err();
        assert_eq!(err.code(), "overflow");
        assert!(TokenBucket::new(u64::MAX, 1, Nanos(1)).is_ok());
        // ceil((2^64 - 2) / 2) periods of 2 ns fit; ceil((2^64 - 1) / 2) do not.
        assert!(Bandwidth::interval(u64::MAX - 1, 2, Nanos(2)).is_ok());
        assert_eq!(
            Bandwidth::interval(u64::MAX, 2, Nanos(2))
                .unwrap_err()
                .code(),
            "overflow"
        );
        assert_eq!(
            Bandwidth::interval(u64::MAX, 1, Nanos(2))
                .unwrap_err()
                .code(),
            "overflow"
        );
    }

    #[test]
    fn a_zero_value_is_named_in_argument_order() {
        let zero = |capacity, tokens, period| {
            Bandwidth::greedy(capacity, tokens, Nanos(period))
                .unwrap_err()
                .argument()
        };
        assert_eq!(zero(0, 0, 0), Some("capacity"));
        assert_eq!(zero(1, 0, 0), Some("refill_tokens"));
        assert_eq!(zero(1, 1, 0), Some("refill_period"));
    }

    #[test]
    fn interval_refill_arrives_whole_at_each_period_end() {
        let rule = Bandwidth::interval(10, 4, Nanos(100))
            .unwrap()
            .with_initial_tokens(0)
            .unwrap();
        let mut bucket = TokenBucket::from_bandwidths([rule]).unwrap();
        let d = bucket.try_acquire(Nanos(1_000), 1).unwrap();
        assert_eq!((d.allowed, d.retry_after), (false, Nanos(100)));
        assert_eq!(bucket.peek(Nanos(1_099), 0).unwrap().remaining, 0);
        assert_eq!(bucket.peek(Nanos(1_100), 0).unwrap().remaining, 4);
        // Five boundaries fill it (20 > 10); a full bucket keeps its phase.
        let d = bucket.try_acquire(Nanos(1_530), 10).unwrap();
        assert!(d.allowed);
        assert_eq!(d.reset_after, Nanos(270)); // 3 boundaries: 1_600, 1_700, 1_800
    }

    #[test]
    fn reservations_are_served_in_order_at_exactly_the_rate() {
        let mut bucket = TokenBucket::new(2, 1, Nanos(1_000)).unwrap();
        let waits: [Nanos; 5] =
            core::array::from_fn(|_| bucket.reserve(Nanos(0), 1, Nanos(3_000)).unwrap().unwrap());
        assert_eq!(waits.map(|w| w.0), [0, 0, 1_000, 2_000, 3_000]);
        // The next wait would be 4_000: denied, nothing booked.
        let denied = bucket
            .reserve(Nanos(0), 1, Nanos(3_999))
            .unwrap()
            .unwrap_err();
        assert_eq!(denied.retry_after, Nanos(4_000));
        // A plain acquire cannot jump the queue.
        assert!(!bucket.try_acquire(Nanos(2_500), 1).unwrap().allowed);
        // Cancelling the last two bookings gives the slot at 3_000 back.
        bucket.refund(Nanos(2_500), 2);
        assert!(bucket.try_acquire(Nanos(3_000), 1).unwrap().allowed);
    }

    #[test]
    fn a_bucket_never_called_becomes_the_new_one_as_built() {
        // Not its own initial tokens capped at the new capacity, nor a bucket
        // called at the reconfigure: one never called has no state to carry.
        let mut bucket = TokenBucket::new(5, 1, Nanos(1_000)).unwrap();
        let new = TokenBucket::with_initial_tokens(10, 1, Nanos(1_000), 8).unwrap();
        bucket.reconfigure(Nanos(500), new.clone());
        assert_eq!(bucket, new);
        assert!(bucket.try_acquire(Nanos(500), 8).unwrap().allowed);
    }

    #[test]
    fn a_wait_for_more_than_2_pow_64_missing_units_is_exact() {
        // 3 tokens at each ns: booking the whole capacity again once it is
        // spent leaves 2^64 - 1 owed, refilled exactly at the slot.
        let rule = Bandwidth::interval(u64::MAX, 3, Nanos(1)).unwrap();
        let mut bucket = TokenBucket::from_bandwidths([rule]).unwrap();
        assert!(bucket.try_acquire(Nanos(0), u64::MAX).unwrap().allowed);
        let booked = bucket.reserve(Nanos(0), u64::MAX, Nanos::MAX).unwrap();
        assert_eq!(booked, Ok(Nanos(u64::MAX / 3)));
        // One unit more is 2^64 missing: 2^64 / 3 periods, rounded up.
        let d = bucket.peek(Nanos(0), 1).unwrap();
        assert_eq!(d.retry_after, Nanos(u64::MAX / 3 + 1));
        let at = |t: u64| bucket.clone().try_acquire(Nanos(t), 1).unwrap().allowed;
        assert!(at(d.retry_after.0));
        assert!(!at(d.retry_after.0 - 1));
    }

    #[test]
    fn a_bucket_never_called_takes_no_refund() {
        // Starting empty, it gained the refund and admitted its whole
        // capacity at once, where a fresh one admits nothing.
        let mut bucket = TokenBucket::with_initial_tokens(10, 1, Nanos(1_000), 0).unwrap();
        bucket.refund(Nanos(0), 10);
        assert_eq!(
            bucket,
            TokenBucket::with_initial_tokens(10, 1, Nanos(1_000), 0).unwrap()
        );
        assert!(!bucket.try_acquire(Nanos(0), 10).unwrap().allowed);
    }

    #[test]
    fn refunds_never_exceed_capacity() {
        let mut bucket = TokenBucket::new(5, 1, Nanos(1_000)).unwrap();
        assert!(bucket.try_acquire(Nanos(0), 2).unwrap().allowed);
        bucket.refund(Nanos(0), 100);
        assert_eq!(bucket.peek(Nanos(0), 0).unwrap().remaining, 5);
        assert_eq!(
            bucket.try_acquire(Nanos(0), 6).unwrap_err().code(),
            "cost_exceeds_limit"
        );
    }
}
