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
        self.events
            .iter()
            .filter(|(at, _)| *at as u128 + self.window as u128 > t as u128)
            .map(|(_, c)| c)
            .sum()
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
