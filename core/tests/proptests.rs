//! Property tests: each limiter against a deliberately naive reference model.

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use ratekeeper::{Bandwidth, Decision, Limiter, Nanos, SlidingWindowLog, TokenBucket};

/// A token bucket kept as an exact rational level with denominator
/// `refill_period`, advanced from scratch on every call.
#[derive(Clone)]
struct RefBucket {
    capacity: u128,
    refill_tokens: u128,
    period: u128,
    /// tokens * period
    scaled: u128,
    time: Option<u64>,
}

impl RefBucket {
    fn new(capacity: u64, refill_tokens: u64, period: u64, initial: u64) -> Self {
        RefBucket {
            capacity: capacity.into(),
            refill_tokens: refill_tokens.into(),
            period: period.into(),
            scaled: initial as u128 * period as u128,
            time: None,
        }
    }

    fn acquire(&mut self, now: u64, cost: u64) -> (bool, u64) {
        let time = *self.time.get_or_insert(now);
        let effective = now.max(time);
        let full = self.capacity * self.period;
        self.scaled = full.min(self.scaled + self.refill_tokens * (effective - time) as u128);
        self.time = Some(effective);
        let cost = cost as u128 * self.period;
        let allowed = self.scaled >= cost;
        if allowed {
            self.scaled -= cost;
        }
        (allowed, (self.scaled / self.period) as u64)
    }
}

/// The units of `events` (instant, units) still in a window of length
/// `window` ending at `t`: an event leaves it exactly `window` after it.
fn used_at(events: &[(u64, u64)], window: u64, t: u64) -> u64 {
    events
        .iter()
        .filter(|(at, _)| *at as u128 + window as u128 > t as u128)
        .map(|(_, c)| c)
        .sum()
}

/// Every admitted event, forever; the window is recounted on every call.
#[derive(Clone)]
struct RefLog {
    limit: u64,
    window: u64,
    events: Vec<(u64, u64)>,
    latest: u64,
}

impl RefLog {
    fn used_at(&self, t: u64) -> u64 {
        used_at(&self.events, self.window, t)
    }

    fn acquire(&mut self, now: u64, cost: u64) -> (bool, u64) {
        self.latest = self.latest.max(now);
        let allowed = self.used_at(self.latest) + cost <= self.limit;
        if allowed {
            self.events.push((self.latest, cost));
        }
        (allowed, self.limit - self.used_at(self.latest))
    }
}

/// The log as a list of every admitted and booked event, each window
/// recounted from it, for every operation: the whole decision, bookings at
/// their own slot and later, refunds at an event's instant.
#[derive(Clone)]
struct RefBookedLog {
    limit: u64,
    window: u64,
    /// (instant, units), booked ones ahead of `latest` included.
    events: Vec<(u64, u64)>,
    latest: u64,
}

impl RefBookedLog {
    /// The units still in the window of `t` (a window ending at `t`).
    fn used_at(&self, t: u64) -> u64 {
        used_at(&self.events, self.window, t)
    }

    /// The newest event still in the window of the latest time, if any.
    fn newest(&self) -> Option<u64> {
        self.events
            .iter()
            .filter(|(at, _)| *at as u128 + self.window as u128 > self.latest as u128)
            .map(|(at, _)| *at)
            .max()
    }

    /// The earliest instant, not before the latest time nor before any
    /// event (served in order), at which `cost` more fits.
    fn fits_at(&self, cost: u64) -> u128 {
        let floor = self.latest.max(self.newest().unwrap_or(0)) as u128;
        let ends = self
            .events
            .iter()
            .map(|(at, _)| *at as u128 + self.window as u128);
        std::iter::once(floor)
            .chain(ends.filter(|&end| end > floor))
            .filter(|&t| t > u64::MAX as u128 || self.used_at(t as u64) + cost <= self.limit)
            .min()
            .unwrap()
    }

    fn acquire(&mut self, now: u64, cost: u64) -> Decision {
        self.latest = self.latest.max(now);
        let fits_at = self.fits_at(cost);
        let allowed = cost == 0 || fits_at == self.latest as u128;
        if allowed && cost > 0 {
            self.events.push((self.latest, cost));
        }
        let ahead = self.newest().is_some_and(|at| at > self.latest);
        let since = |t: u128| Nanos(t.saturating_sub(now as u128).min(u64::MAX as u128) as u64);
        Decision {
            allowed,
            remaining: if ahead {
                0
            } else {
                self.limit.saturating_sub(self.used_at(self.latest))
            },
            limit: self.limit,
            retry_after: if allowed { Nanos(0) } else { since(fits_at) },
            reset_after: self
                .newest()
                .map_or(Nanos(0), |at| since(at as u128 + self.window as u128)),
        }
    }

    /// Books `cost` at `now + wait`, or at the latest time if later, when it
    /// fits there and the log has room: `2 * limit` instants, those still in
    /// the window and the booked ones.
    fn book(&mut self, now: u64, wait: u64, cost: u64) -> bool {
        self.latest = self.latest.max(now);
        if cost == 0 {
            return true;
        }
        let Some(slot) = now.checked_add(wait).map(|s| s.max(self.latest)) else {
            return false;
        };
        if (slot as u128) < self.fits_at(cost) {
            return false;
        }
        let mut instants: Vec<u64> = self
            .events
            .iter()
            .filter(|(at, c)| *c > 0 && *at as u128 + self.window as u128 > self.latest as u128)
            .map(|(at, _)| *at)
            .collect();
        instants.sort();
        instants.dedup();
        if !instants.contains(&slot) && instants.len() as u64 == 2 * self.limit {
            return false;
        }
        self.events.push((slot, cost));
        true
    }

    /// Takes up to `cost` units off those recorded at exactly `taken_at`.
    fn refund(&mut self, taken_at: u64, mut cost: u64) {
        for (at, c) in self.events.iter_mut().rev() {
            if *at == taken_at {
                let given = cost.min(*c);
                (*c, cost) = (*c - given, cost - given);
            }
        }
        self.events.retain(|(_, c)| *c > 0);
    }
}

/// What the model-checked log is asked at each step.
#[derive(Clone, Debug)]
enum LogCall {
    Acquire,
    /// `reserve` with this most wait.
    Reserve(u64),
    /// `reserve_after` this much after the earliest slot (before it, when
    /// negative: refused).
    ReserveLater(i64),
    /// Gives back units of one event, chosen by index, at its instant.
    Refund(usize),
}

fn log_call() -> impl Strategy<Value = LogCall> {
    prop_oneof![
        4 => Just(LogCall::Acquire),
        3 => (0u64..4_000).prop_map(LogCall::Reserve),
        2 => (-1_000i64..3_000).prop_map(LogCall::ReserveLater),
        2 => any::<usize>().prop_map(LogCall::Refund),
    ]
}

/// Any u64, with the edges likely.
fn extreme() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(u64::MAX),
        Just(u64::MAX - 1),
        Just(1 << 63),
        any::<u64>()
    ]
}

/// One call of any kind; errors (cost above the limit) are fine, panics are not.
fn exercise(limiter: &mut impl Limiter, now: u64, cost: u64, wait: u64, op: u8) {
    let (now, wait) = (Nanos(now), Nanos(wait));
    match op {
        0 => drop(limiter.try_acquire(now, cost)),
        1 => drop(limiter.peek(now, cost)),
        2 => drop(limiter.reserve(now, cost, wait)),
        _ => limiter.refund(now, cost),
    }
}

/// Times that mostly move forward, sometimes stand still, sometimes go back.
fn trace(max_step: u64, len: usize) -> impl Strategy<Value = Vec<(i64, u64)>> {
    let step = prop_oneof![
        6 => 0..=max_step as i64,
        2 => Just(0i64),
        1 => -(max_step as i64)..0,
    ];
    prop::collection::vec((step, 0u64..=4), 1..len)
}

fn times(steps: &[(i64, u64)], start: u64) -> Vec<(u64, u64)> {
    let mut t = start as i64;
    steps
        .iter()
        .map(|&(d, cost)| {
            t = (t + d).max(0);
            (t as u64, cost)
        })
        .collect()
}

fn bucket_config() -> impl Strategy<Value = (u64, u64, u64, u64)> {
    (1u64..=12, 1u64..=9, 1u64..=5_000)
        .prop_flat_map(|(c, r, p)| (Just(c), Just(r), Just(p), 0..=c))
}

/// `retry_after` is exact: asked again of the limiter as the denial left it,
/// the same request is allowed at `now + retry_after` and denied 1 ns earlier.
fn assert_retry_exact<L: Clone>(
    limiter: &L,
    now: u64,
    cost: u64,
    d: &Decision,
    acquire: impl Fn(&mut L, Nanos, u64) -> Decision,
) {
    if d.allowed {
        return;
    }
    let at = now + d.retry_after.0;
    assert!(
        acquire(&mut limiter.clone(), Nanos(at), cost).allowed,
        "not allowed at now + retry_after"
    );
    if d.retry_after.0 > 0 {
        assert!(
            !acquire(&mut limiter.clone(), Nanos(at - 1), cost).allowed,
            "allowed 1 ns early"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        // Shrunk failures are kept in core/proptest-regressions/ and replayed first.
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/proptests.txt"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn bucket_decides_like_the_rational_model(
        (capacity, refill, period, initial) in bucket_config(),
        steps in trace(3_000, 80),
        start in 0u64..1_000_000,
    ) {
        let mut bucket = TokenBucket::with_initial_tokens(capacity, refill, Nanos(period), initial).unwrap();
        let mut reference = RefBucket::new(capacity, refill, period, initial);
        for (now, cost) in times(&steps, start) {
            let cost = cost.min(capacity);
            let d = bucket.try_acquire(Nanos(now), cost).unwrap();
            prop_assert_eq!((d.allowed, d.remaining), reference.acquire(now, cost));
            prop_assert_eq!(d.limit, capacity);
            assert_retry_exact(&bucket, now, cost, &d, |b, t, c| b.try_acquire(t, c).unwrap());
            // reset_after: full at now + reset_after, and not 1 ns earlier.
            let full = |t: u64| bucket.clone().try_acquire(Nanos(t), 0).unwrap().remaining == capacity;
            prop_assert!(full(now + d.reset_after.0));
            prop_assert!(d.reset_after.0 == 0 || !full(now + d.reset_after.0 - 1));
        }
    }

    #[test]
    fn log_decides_like_the_list_of_events(
        limit in 1u64..=10,
        window in 1u64..=5_000,
        steps in trace(2_000, 80),
        start in 0u64..1_000_000,
    ) {
        let mut log = SlidingWindowLog::new(limit, Nanos(window)).unwrap();
        let mut reference = RefLog { limit, window, events: vec![], latest: 0 };
        for (now, cost) in times(&steps, start) {
            let cost = cost.min(limit);
            let d = log.try_acquire(Nanos(now), cost).unwrap();
            prop_assert_eq!((d.allowed, d.remaining), reference.acquire(now, cost));
            assert_retry_exact(&log, now, cost, &d, |l, t, c| l.try_acquire(t, c).unwrap());
            let empty = |t: u64| log.clone().try_acquire(Nanos(t), 0).unwrap().remaining == limit;
            prop_assert!(empty(now + d.reset_after.0));
            prop_assert!(d.reset_after.0 == 0 || !empty(now + d.reset_after.0 - 1));
        }
    }

    /// Bookings, at their own slot or another, and refunds between acquires:
    /// every decision is the list's, and every booking too.
    #[test]
    fn log_operations_decide_like_the_list_of_events(
        limit in 1u64..=5,
        window in 1u64..=3_000,
        steps in trace(1_500, 80),
        calls in prop::collection::vec(log_call(), 80),
        start in 0u64..1_000_000,
    ) {
        let mut log = SlidingWindowLog::new(limit, Nanos(window)).unwrap();
        let mut model = RefBookedLog { limit, window, events: vec![], latest: 0 };
        for ((now, cost), call) in times(&steps, start).into_iter().zip(calls) {
            let cost = cost.min(limit);
            match call {
                LogCall::Acquire => {
                    let d = log.try_acquire(Nanos(now), cost).unwrap();
                    prop_assert_eq!(d, model.acquire(now, cost), "{} at {}", cost, now);
                }
                LogCall::Reserve(max_wait) => {
                    let booked = log.reserve(Nanos(now), cost, Nanos(max_wait)).unwrap();
                    let d = model.acquire(now, cost);
                    let wait = d.retry_after.0;
                    let expected = if d.allowed {
                        Ok(Nanos::ZERO)
                    } else if wait <= max_wait && model.book(now, wait, cost) {
                        Ok(d.retry_after)
                    } else {
                        Err(d)
                    };
                    prop_assert_eq!(booked, expected, "{} at {}", cost, now);
                }
                LogCall::ReserveLater(extra) => {
                    let own = log.peek(Nanos(now), cost).unwrap().retry_after.0;
                    let wait = own.saturating_add_signed(extra);
                    let booked = log.reserve_after(Nanos(now), cost, Nanos(wait)).unwrap();
                    let expected = model.book(now, wait, cost);
                    prop_assert_eq!(booked, expected, "{} {} after {}", cost, wait, now);
                }
                LogCall::Refund(i) => {
                    if let Some(&(at, _)) = model.events.get(i % model.events.len().max(1)) {
                        log.refund(Nanos(at), cost);
                        model.refund(at, cost);
                    }
                }
            }
            let expected = model.clone().acquire(now, 1);
            prop_assert_eq!(log.peek(Nanos(now), 1).unwrap(), expected, "after {:?} at {}", call, now);
        }
    }

    /// In any span [a, b], a bucket admits at most capacity + rate * (b - a).
    #[test]
    fn bucket_never_admits_more_than_burst_plus_rate(
        (capacity, refill, period, _) in bucket_config(),
        steps in trace(1_000, 150),
    ) {
        let mut bucket = TokenBucket::new(capacity, refill, Nanos(period)).unwrap();
        let mut admitted = vec![];
        let mut latest = 0;
        for (now, cost) in times(&steps, 0) {
            latest = latest.max(now);
            if bucket.try_acquire(Nanos(now), cost.min(capacity)).unwrap().allowed {
                admitted.push((latest, cost.min(capacity)));
            }
        }
        for (i, &(a, _)) in admitted.iter().enumerate() {
            let mut sum = 0u128;
            for &(b, cost) in &admitted[i..] {
                sum += cost as u128;
                let bound = capacity as u128 + refill as u128 * (b - a) as u128 / period as u128;
                prop_assert!(sum <= bound, "{} admitted in [{}, {}], bound {}", sum, a, b, bound);
            }
        }
    }

    /// In any window [a, a + window), a log admits at most `limit`.
    #[test]
    fn log_never_admits_more_than_limit_in_any_window(
        limit in 1u64..=10,
        window in 1u64..=3_000,
        steps in trace(700, 150),
    ) {
        let mut log = SlidingWindowLog::new(limit, Nanos(window)).unwrap();
        let mut admitted = vec![];
        let mut latest = 0;
        for (now, cost) in times(&steps, 0) {
            latest = latest.max(now);
            if log.try_acquire(Nanos(now), cost.min(limit)).unwrap().allowed {
                admitted.push((latest, cost.min(limit)));
            }
        }
        for &(a, _) in &admitted {
            let in_window: u64 = admitted.iter().filter(|(t, _)| *t >= a && *t - a < window).map(|(_, c)| c).sum();
            prop_assert!(in_window <= limit);
        }
    }

    /// A step back in time never grants more than standing still would.
    #[test]
    fn time_going_backwards_grants_nothing(
        (capacity, refill, period, initial) in bucket_config(),
        limit in 1u64..=10,
        steps in trace(3_000, 40),
        back in 1u64..1_000_000,
        cost in 0u64..=4,
    ) {
        let mut bucket = TokenBucket::with_initial_tokens(capacity, refill, Nanos(period), initial).unwrap();
        let mut log = SlidingWindowLog::new(limit, Nanos(period)).unwrap();
        let mut latest = 0;
        for (now, c) in times(&steps, 2_000_000) {
            latest = latest.max(now);
            let _ = bucket.try_acquire(Nanos(now), c.min(capacity)).unwrap();
            let _ = log.try_acquire(Nanos(now), c.min(limit)).unwrap();
        }
        let earlier = Nanos(latest - back.min(latest));
        let (b_back, b_still) = (
            bucket.clone().try_acquire(earlier, cost.min(capacity)).unwrap(),
            bucket.clone().try_acquire(Nanos(latest), cost.min(capacity)).unwrap(),
        );
        prop_assert_eq!((b_back.allowed, b_back.remaining), (b_still.allowed, b_still.remaining));
        let (l_back, l_still) = (
            log.clone().try_acquire(earlier, cost.min(limit)).unwrap(),
            log.clone().try_acquire(Nanos(latest), cost.min(limit)).unwrap(),
        );
        prop_assert_eq!((l_back.allowed, l_back.remaining), (l_still.allowed, l_still.remaining));
    }

    /// Draining a bucket at arbitrary instants admits exactly the tokens the
    /// rate has produced: floor(refill * elapsed / period), with no drift.
    #[test]
    fn draining_at_any_instants_admits_exactly_the_rate(
        refill in 1u64..=1_000,
        period in 1u64..=1_000_000_000,
        gaps in prop::collection::vec(0u64..=5_000_000_000, 1..200),
    ) {
        // The largest capacity whose refill time still fits in 64 bits: never reached here.
        let capacity = (u64::MAX as u128 * refill as u128 / period as u128).min(u64::MAX as u128) as u64;
        let mut bucket = TokenBucket::with_initial_tokens(capacity, refill, Nanos(period), 0).unwrap();
        let _ = bucket.try_acquire(Nanos(0), 0).unwrap();
        let (mut now, mut admitted) = (0u64, 0u128);
        for gap in gaps {
            now += gap;
            let available = bucket.try_acquire(Nanos(now), 0).unwrap().remaining;
            prop_assert!(bucket.try_acquire(Nanos(now), available).unwrap().allowed);
            admitted += available as u128;
        }
        prop_assert_eq!(admitted, refill as u128 * now as u128 / period as u128);
    }

    /// No input, however extreme, panics, whatever the operation.
    #[test]
    fn extreme_inputs_never_panic(
        capacity in extreme(), refill in extreme(), period in extreme(), window in extreme(),
        interval in any::<bool>(),
        calls in prop::collection::vec((extreme(), extreme(), extreme(), 0u8..5), 1..24),
    ) {
        let rule = if interval { Bandwidth::interval(capacity, refill, Nanos(period)) }
                   else { Bandwidth::greedy(capacity, refill, Nanos(period)) };
        if let Ok(rule) = rule {
            let mut bucket = TokenBucket::from_bandwidths([rule, rule]).unwrap();
            for &(now, cost, wait, op) in &calls {
                exercise(&mut bucket, now, cost, wait, op);
                if op == 4 {
                    bucket.reconfigure(Nanos(now), TokenBucket::from_bandwidths([rule, rule]).unwrap());
                }
            }
        }
        if let Ok(mut log) = SlidingWindowLog::new(capacity % 64 + 1, Nanos(window)) {
            for &(now, cost, wait, op) in &calls {
                exercise(&mut log, now, cost, wait, op);
                if op == 4 {
                    log.reconfigure(Nanos(now), SlidingWindowLog::new(cost % 64 + 1, Nanos(wait.max(1))).unwrap());
                }
            }
        }
    }
}

#[test]
fn seven_per_second_over_a_million_periods_admit_exactly_seven_million() {
    let mut bucket = TokenBucket::with_initial_tokens(7, 7, Nanos::from_secs(1), 0).unwrap();
    let mut admitted = 0u64;
    // Probe every 333_333_337 ns: never aligned with the period.
    let mut now = 0u64;
    let end = 1_000_000 * 1_000_000_000u64;
    while now <= end {
        let d = bucket.try_acquire(Nanos(now), 0).unwrap();
        admitted += d.remaining;
        let _ = bucket.try_acquire(Nanos(now), d.remaining).unwrap();
        now += 333_333_337;
    }
    let last = now - 333_333_337;
    assert_eq!(admitted, 7 * last as u128 as u64 / 1_000_000_000);
    let d = bucket.try_acquire(Nanos(end), 0).unwrap();
    assert_eq!(admitted + d.remaining, 7_000_000);
}
