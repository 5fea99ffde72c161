//! Property tests of `Gcra`: the textbook formula with an absolute TAT in 128
//! bits, and `TokenBucket::new(burst, 1, T)`, which must decide the same.

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use ratekeeper::{Decision, Gcra, Limiter, Nanos, TokenBucket};

/// GCRA as usually written: an absolute theoretical arrival time, plus the
/// latest time seen, in 128 bits so that nothing overflows.
#[derive(Clone)]
struct Textbook {
    burst: i128,
    t: i128,
    tat: i128,
    latest: i128,
}

impl Textbook {
    /// The decision, and the TAT and time it leaves if committed.
    fn decide(&self, now: u64, cost: u64) -> (Decision, i128, i128) {
        let (now, n) = (now as i128, cost as i128);
        let at = self.latest.max(now);
        let mut tat = self.tat.max(at);
        let allowed = n == 0 || tat + n * self.t - self.burst * self.t <= at;
        if allowed {
            tat += n * self.t;
        }
        let ns = |x: i128| Nanos(x.min(u64::MAX as i128) as u64);
        let d = Decision {
            allowed,
            remaining: ((self.burst * self.t - (tat - at)).max(0) / self.t) as u64,
            limit: self.burst as u64,
            retry_after: ns(if allowed {
                0
            } else {
                tat + n * self.t - self.burst * self.t - now
            }),
            reset_after: ns(if tat > at { tat - now } else { 0 }),
        };
        (d, tat, at)
    }

    fn acquire(&mut self, now: u64, cost: u64) -> Decision {
        let (d, tat, at) = self.decide(now, cost);
        (self.tat, self.latest) = (tat, at);
        d
    }

    fn reserve(&mut self, now: u64, cost: u64, max_wait: u64) -> Result<Nanos, Decision> {
        let (d, tat, at) = self.decide(now, cost);
        (self.tat, self.latest) = (tat, at);
        if d.allowed {
            return Ok(Nanos::ZERO);
        }
        if d.retry_after.0 > max_wait {
            return Err(d);
        }
        (self.tat, self.latest) = (tat + cost as i128 * self.t, at);
        Ok(d.retry_after)
    }

    fn refund(&mut self, cost: u64) {
        self.tat = (self.tat - cost as i128 * self.t).max(self.latest);
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Acquire,
    Peek,
    Reserve(u64),
    Refund,
}

/// Times that mostly move forward, sometimes stand still, sometimes go back,
/// each with an operation and a cost.
fn trace(max_step: u64, len: usize) -> impl Strategy<Value = Vec<(i64, Op, u64)>> {
    let step = prop_oneof![6 => 0..=max_step as i64, 2 => Just(0i64), 1 => -(max_step as i64)..0];
    let op = prop_oneof![
        5 => Just(Op::Acquire),
        1 => Just(Op::Peek),
        2 => (0..=2 * max_step).prop_map(Op::Reserve),
        1 => Just(Op::Refund),
    ];
    prop::collection::vec((step, op, 0u64..=4), 1..len)
}

fn times(steps: &[(i64, Op, u64)], start: u64) -> Vec<(u64, Op, u64)> {
    let mut t = start as i64;
    steps
        .iter()
        .map(|&(d, op, cost)| {
            t = (t + d).max(0);
            (t as u64, op, cost)
        })
        .collect()
}

#[derive(Debug, PartialEq)]
enum Answer {
    Decision(Decision),
    Reserved(Result<Nanos, Decision>),
    Refunded,
}

fn run(limiter: &mut impl Limiter, op: Op, now: u64, cost: u64) -> Answer {
    match op {
        Op::Acquire => Answer::Decision(limiter.try_acquire(Nanos(now), cost).unwrap()),
        Op::Peek => Answer::Decision(limiter.peek(Nanos(now), cost).unwrap()),
        Op::Reserve(w) => Answer::Reserved(limiter.reserve(Nanos(now), cost, Nanos(w)).unwrap()),
        Op::Refund => {
            limiter.refund(Nanos(now), cost);
            Answer::Refunded
        }
    }
}

/// Values at and around the edges of `u64`.
fn extreme() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), Just(1u64), Just(u64::MAX), any::<u64>()]
}

fn config() -> impl Strategy<Value = (u64, u64)> {
    (1u64..=8, 1u64..=2_000)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/gcra.txt",
        ))),
        ..ProptestConfig::default()
    })]

    /// Every answer equals the textbook formula's and the token bucket's;
    /// retry_after and reset_after are exact.
    #[test]
    fn decides_like_the_textbook_and_the_token_bucket(
        (burst, t) in config(),
        steps in trace(3_000, 80),
        start in 0u64..1_000_000,
    ) {
        let mut gcra = Gcra::new(burst, Nanos(t)).unwrap();
        let mut bucket = TokenBucket::new(burst, 1, Nanos(t)).unwrap();
        let mut textbook = Textbook { burst: burst.into(), t: t.into(), tat: 0, latest: 0 };
        for (now, op, cost) in times(&steps, start) {
            let cost = cost.min(burst);
            let expected = match op {
                Op::Acquire => Answer::Decision(textbook.acquire(now, cost)),
                Op::Peek => Answer::Decision(textbook.clone().acquire(now, cost)),
                Op::Reserve(w) => Answer::Reserved(textbook.reserve(now, cost, w)),
                Op::Refund => { textbook.refund(cost); Answer::Refunded }
            };
            let got = run(&mut gcra, op, now, cost);
            prop_assert_eq!(&got, &expected);
            prop_assert_eq!(&got, &run(&mut bucket, op, now, cost));
            let d = gcra.peek(Nanos(now), cost).unwrap();
            let allowed_at = |at: u64| gcra.peek(Nanos(at), cost).unwrap().allowed;
            prop_assert!(allowed_at(now + d.retry_after.0));
            prop_assert!(d.retry_after.0 == 0 || !allowed_at(now + d.retry_after.0 - 1));
            // A reservation waits exactly retry_after: max_wait 1 ns shorter refuses it.
            if !d.allowed {
                let reserve = |w: u64| gcra.clone().reserve(Nanos(now), cost, Nanos(w)).unwrap();
                prop_assert_eq!(reserve(d.retry_after.0), Ok(d.retry_after));
                prop_assert_eq!(reserve(d.retry_after.0 - 1), Err(d));
            }
            let d = gcra.peek(Nanos(now), 0).unwrap();
            let full = |at: u64| gcra.peek(Nanos(at), 0).unwrap().remaining == burst;
            prop_assert!(full(now + d.reset_after.0));
            prop_assert!(d.reset_after.0 == 0 || !full(now + d.reset_after.0 - 1));
        }
    }

    /// Reconfiguring carries state over exactly as the token bucket does.
    #[test]
    fn reconfigures_like_the_token_bucket(
        (burst, t) in config(),
        (new_burst, new_t) in config(),
        before in trace(3_000, 40),
        after in trace(3_000, 40),
        at in 0u64..200_000,
    ) {
        let mut gcra = Gcra::new(burst, Nanos(t)).unwrap();
        let mut bucket = TokenBucket::new(burst, 1, Nanos(t)).unwrap();
        // The bucket replaces a never-called state outright; Gcra cannot tell.
        let _ = gcra.try_acquire(Nanos(0), 0).unwrap();
        let _ = bucket.try_acquire(Nanos(0), 0).unwrap();
        for (now, op, cost) in times(&before, 0) {
            run(&mut gcra, op, now, cost.min(burst));
            run(&mut bucket, op, now, cost.min(burst));
        }
        gcra.reconfigure(Nanos(at), Gcra::new(new_burst, Nanos(new_t)).unwrap());
        bucket.reconfigure(Nanos(at), TokenBucket::new(new_burst, 1, Nanos(new_t)).unwrap());
        for (now, op, cost) in times(&after, at) {
            let cost = cost.min(new_burst);
            prop_assert_eq!(run(&mut gcra, op, now, cost), run(&mut bucket, op, now, cost));
        }
    }

    /// Over the instants requests were admitted (a reservation at its slot),
    /// any span [a, b] holds at most burst + floor((b - a) / T) units, plus
    /// what was refunded.
    #[test]
    fn never_admits_more_than_burst_plus_rate(
        (burst, t) in config(),
        steps in trace(1_000, 150),
    ) {
        let mut gcra = Gcra::new(burst, Nanos(t)).unwrap();
        let (mut admitted, mut refunded, mut latest) = (vec![], 0u64, 0u64);
        for (now, op, cost) in times(&steps, 0) {
            let cost = cost.min(burst);
            match run(&mut gcra, op, now, cost) {
                Answer::Decision(d) if matches!(op, Op::Acquire) => {
                    latest = latest.max(now);
                    if d.allowed { admitted.push((latest, cost)); }
                }
                Answer::Reserved(booked) => {
                    latest = latest.max(now);
                    // Admitted at once means at the limiter's latest time.
                    if let Ok(wait) = booked { admitted.push((latest.max(now + wait.0), cost)); }
                }
                Answer::Refunded => refunded += cost,
                _ => {}
            }
        }
        admitted.sort();
        for (i, &(a, _)) in admitted.iter().enumerate() {
            let mut sum = 0;
            for &(b, cost) in &admitted[i..] {
                sum += cost;
                prop_assert!(sum <= burst + (b - a) / t + refunded, "{} in [{}, {}]", sum, a, b);
            }
        }
    }

    /// A step back in time sees the limiter as at the latest time: the same
    /// answer, with waits longer by the step.
    #[test]
    fn time_going_backwards_grants_nothing(
        (burst, t) in config(),
        steps in trace(3_000, 40),
        back in 1u64..1_000_000,
        cost in 0u64..=8,
    ) {
        let mut gcra = Gcra::new(burst, Nanos(t)).unwrap();
        let mut latest = 0;
        for (now, op, c) in times(&steps, 2_000_000) {
            latest = latest.max(now);
            run(&mut gcra, op, now, c.min(burst));
        }
        // Peeks and refused reservations leave the clock; set it to `latest`.
        let _ = gcra.try_acquire(Nanos(latest), 0).unwrap();
        let earlier = latest - back.min(latest);
        let lag = |ns: Nanos| if ns.0 == 0 { 0 } else { ns.0 + latest - earlier };
        let cost = cost.min(burst);
        let (back, still) = (gcra.clone().try_acquire(Nanos(earlier), cost).unwrap(),
                             gcra.try_acquire(Nanos(latest), cost).unwrap());
        prop_assert_eq!((back.allowed, back.remaining), (still.allowed, still.remaining));
        prop_assert_eq!(
            (back.retry_after.0, back.reset_after.0),
            (lag(still.retry_after), lag(still.reset_after))
        );
    }

    /// Draining at arbitrary instants admits exactly burst + floor(t / T).
    #[test]
    fn draining_at_any_instants_admits_exactly_the_rate(
        t in 1u64..=1_000_000_000,
        gaps in prop::collection::vec(0u64..=5_000_000_000, 1..200),
    ) {
        // A burst as large as fits, so that no probe finds the limiter full.
        let burst = u64::MAX / t;
        let mut gcra = Gcra::new(burst, Nanos(t)).unwrap();
        prop_assert!(gcra.try_acquire(Nanos(0), burst).unwrap().allowed);
        let (mut now, mut admitted) = (0u64, 0u128);
        for gap in gaps {
            now += gap;
            let available = gcra.peek(Nanos(now), 0).unwrap().remaining;
            prop_assert!(gcra.try_acquire(Nanos(now), available).unwrap().allowed);
            admitted += available as u128;
        }
        prop_assert_eq!(admitted, (now / t) as u128);
    }

    /// No input, however extreme, panics.
    #[test]
    fn extreme_inputs_never_panic(
        config in prop::collection::vec(extreme(), 4),
        calls in prop::collection::vec((extreme(), extreme(), 0..5u8), 1..20),
    ) {
        let _ = Gcra::per_period(config[0], config[2], Nanos(config[3]));
        let build = |i: usize| Gcra::new(config[i], Nanos(config[i + 1]));
        let (Ok(mut gcra), Ok(new)) = (build(0), build(2)) else {
            return Ok(());
        };
        for &(now, x, op) in &calls {
            match op {
                0 => { let _ = gcra.try_acquire(Nanos(now), x); }
                1 => { let _ = gcra.peek(Nanos(now), x); }
                2 => { let _ = gcra.reserve(Nanos(now), x % 4, Nanos(x)); }
                3 => gcra.refund(Nanos(now), x),
                _ => gcra.reconfigure(Nanos(now), new.clone()),
            }
        }
    }
}

#[test]
fn a_million_periods_at_about_7_per_second_do_not_drift() {
    // 7 per second is not a whole number of ns apart; 142_857_143 ns is.
    let t = 142_857_143;
    let mut gcra = Gcra::new(7, Nanos(t)).unwrap();
    let (mut now, mut admitted) = (0u64, 0u64);
    let end = 1_000_000 * 1_000_000_000u64;
    // Probe every 333_333_337 ns: never aligned with the interval.
    while now <= end {
        let available = gcra.peek(Nanos(now), 0).unwrap().remaining;
        assert!(gcra.try_acquire(Nanos(now), available).unwrap().allowed);
        admitted += available;
        assert_eq!(admitted, 7 + now / t);
        now += 333_333_337;
    }
}
