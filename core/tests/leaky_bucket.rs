//! Property tests of `LeakyBucket` against a queue kept as a plain list of
//! every unit's departure slot.

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use ratekeeper::{Decision, LeakyBucket, Limiter, Nanos};

/// Every unit ever queued, as the instant it leaves; in 128 bits.
#[derive(Clone)]
struct RefQueue {
    capacity: u64,
    interval: u128,
    latest: u128,
    slots: Vec<u128>,
}

impl RefQueue {
    /// Units not yet through at `t`: the one being sent counts.
    fn queued(&self, t: u128) -> u64 {
        self.slots
            .iter()
            .filter(|&&s| s + self.interval > t)
            .count() as u64
    }

    /// When the next unit to join may leave, as of `at`.
    fn free(&self, at: u128) -> u128 {
        self.slots.last().map_or(at, |&s| at.max(s + self.interval))
    }

    fn decide(&mut self, now: u64, cost: u64) -> Decision {
        let now = now as u128;
        self.latest = self.latest.max(now);
        let (at, free) = (self.latest, self.free(self.latest));
        let allowed = cost == 0 || free == at;
        let queued = self.queued(at) + if allowed { cost } else { 0 };
        let empty_at = if allowed {
            free + cost as u128 * self.interval
        } else {
            free
        };
        let ns = |x: u128| Nanos(x as u64);
        Decision {
            allowed,
            // What may be taken at once: all of it while nothing is queued.
            remaining: if queued == 0 { self.capacity } else { 0 },
            limit: self.capacity,
            retry_after: ns(if allowed { 0 } else { free - now }),
            reset_after: ns(if empty_at > at { empty_at - now } else { 0 }),
        }
    }

    fn push(&mut self, from: u128, cost: u64) {
        self.slots
            .extend((0..cost as u128).map(|k| from + k * self.interval));
    }

    fn acquire(&mut self, now: u64, cost: u64) -> Decision {
        let d = self.decide(now, cost);
        if d.allowed {
            self.push(self.latest, cost);
        }
        d
    }

    fn reserve(&mut self, now: u64, cost: u64, max_wait: u64) -> Result<Nanos, Decision> {
        let d = self.acquire(now, cost);
        let free = self.free(self.latest);
        if d.allowed {
            return Ok(Nanos::ZERO);
        }
        if self.queued(self.latest) + cost > self.capacity || free - now as u128 > max_wait as u128
        {
            return Err(d);
        }
        self.push(free, cost);
        Ok(Nanos((free - now as u128) as u64))
    }

    /// The rule under test: units ending where the queue ends leave it.
    fn refund(&mut self, taken_at: u64, cost: u64) {
        let (taken_at, end) = (
            taken_at as u128,
            taken_at as u128 + cost as u128 * self.interval,
        );
        if cost > 0 && end == self.free(self.latest) {
            self.slots.retain(|&s| s < taken_at);
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Acquire,
    Peek,
    Reserve(u64),
    /// Refund the latest booking still listed, or at a time this far back.
    Refund(Option<u64>),
}

fn trace(max_step: u64, len: usize) -> impl Strategy<Value = Vec<(i64, Op, u64)>> {
    let step = prop_oneof![6 => 0..=max_step as i64, 2 => Just(0i64), 1 => -(max_step as i64)..0];
    let op = prop_oneof![
        3 => Just(Op::Acquire),
        1 => Just(Op::Peek),
        4 => (0..=4 * max_step).prop_map(Op::Reserve),
        2 => prop::option::of(0..=max_step).prop_map(Op::Refund),
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

/// Values at and around the edges of `u64`.
fn extreme() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), Just(1u64), Just(u64::MAX), any::<u64>()]
}

fn config() -> impl Strategy<Value = (u64, u64)> {
    (1u64..=8, 1u64..=1_000)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/leaky_bucket.txt",
        ))),
        ..ProptestConfig::default()
    })]

    /// Every answer equals the list's; retry_after and reset_after are exact.
    #[test]
    fn decides_like_the_list_of_departures(
        (capacity, interval) in config(),
        steps in trace(2_000, 80),
        start in 0u64..1_000_000,
    ) {
        let mut queue = LeakyBucket::new(capacity, Nanos(interval)).unwrap();
        let mut reference =
            RefQueue { capacity, interval: interval.into(), latest: 0, slots: vec![] };
        let mut booked = vec![];
        for (now, op, cost) in times(&steps, start) {
            let cost = cost.min(capacity);
            match op {
                Op::Acquire => {
                    let d = queue.try_acquire(Nanos(now), cost).unwrap();
                    prop_assert_eq!(d, reference.acquire(now, cost));
                    if d.allowed { booked.push((now.max(reference.latest as u64), cost)); }
                }
                Op::Peek => {
                    let expected = reference.clone().decide(now, cost);
                    prop_assert_eq!(queue.peek(Nanos(now), cost).unwrap(), expected);
                }
                Op::Reserve(w) => {
                    let r = queue.reserve(Nanos(now), cost, Nanos(w)).unwrap();
                    prop_assert_eq!(r, reference.reserve(now, cost, w));
                    if let Ok(wait) = r {
                        booked.push(((reference.latest as u64).max(now + wait.0), cost));
                    }
                }
                Op::Refund(back) => {
                    let (at, c) = match back {
                        Some(back) => (now.saturating_sub(back), cost),
                        None => booked.pop().unwrap_or((now, cost)),
                    };
                    queue.refund(Nanos(at), c);
                    reference.refund(at, c);
                }
            }
            let d = queue.peek(Nanos(now), cost).unwrap();
            let allowed_at = |at: u64| queue.peek(Nanos(at), cost).unwrap().allowed;
            prop_assert!(allowed_at(now + d.retry_after.0));
            prop_assert!(d.retry_after.0 == 0 || !allowed_at(now + d.retry_after.0 - 1));
            // A reservation waits exactly retry_after: max_wait 1 ns shorter refuses it.
            if !d.allowed && reference.queued(reference.latest.max(now as u128)) + cost <= capacity {
                let reserve = |w: u64| queue.clone().reserve(Nanos(now), cost, Nanos(w)).unwrap();
                prop_assert_eq!(reserve(d.retry_after.0), Ok(d.retry_after));
                prop_assert_eq!(reserve(d.retry_after.0 - 1), Err(d));
            }
            let d = queue.peek(Nanos(now), 0).unwrap();
            let empty = |at: u64| queue.peek(Nanos(at), 0).unwrap().remaining == capacity;
            prop_assert!(empty(now + d.reset_after.0));
            prop_assert!(d.reset_after.0 == 0 || !empty(now + d.reset_after.0 - 1));
        }
    }

    /// From the answers alone: requests leave in order, each at least
    /// `cost * interval` after the one before (refunding the latest takes it
    /// out), and at most `capacity` units are ever queued.
    #[test]
    fn requests_leave_in_order_spaced_by_the_interval(
        (capacity, interval) in config(),
        steps in trace(1_000, 150),
    ) {
        let mut queue = LeakyBucket::new(capacity, Nanos(interval)).unwrap();
        let (mut left, mut latest) = (Vec::<(u64, u64)>::new(), 0u64);
        for (now, op, cost) in times(&steps, 0) {
            let cost = cost.min(capacity);
            let slot = match op {
                Op::Acquire => queue.try_acquire(Nanos(now), cost).unwrap().allowed.then_some(0),
                Op::Reserve(w) => {
                    queue.reserve(Nanos(now), cost, Nanos(w)).unwrap().ok().map(|w| now + w.0)
                }
                Op::Peek => None,
                Op::Refund(_) => {
                    if let Some((at, c)) = left.pop() { queue.refund(Nanos(at), c); }
                    None
                }
            };
            if !matches!(op, Op::Peek | Op::Refund(_)) { latest = latest.max(now); }
            // Cost 0 is always allowed and occupies nothing.
            let Some(slot) = slot.filter(|_| cost > 0).map(|s| s.max(latest)) else { continue };
            if let Some(&(before, c)) = left.last() {
                prop_assert!(slot >= before + c * interval, "{} too soon after {}", slot, before);
            }
            left.push((slot, cost));
            // Units whose time has not ended are still in the queue.
            let in_queue =
                |&(s, c): &(u64, u64)| (1..=c).filter(|k| s + k * interval > latest).count();
            prop_assert!(left.iter().map(in_queue).sum::<usize>() as u64 <= capacity);
        }
    }

    /// A step back in time sees the queue as at the latest time: the same
    /// answer, with waits longer by the step.
    #[test]
    fn time_going_backwards_grants_nothing(
        (capacity, interval) in config(),
        steps in trace(2_000, 40),
        back in 1u64..1_000_000,
        cost in 0u64..=8,
    ) {
        let mut queue = LeakyBucket::new(capacity, Nanos(interval)).unwrap();
        let mut latest = 0;
        for (now, op, c) in times(&steps, 2_000_000) {
            latest = latest.max(now);
            match op {
                Op::Reserve(w) => { let _ = queue.reserve(Nanos(now), c.min(capacity), Nanos(w)); }
                _ => { let _ = queue.try_acquire(Nanos(now), c.min(capacity)).unwrap(); }
            }
        }
        let earlier = latest - back.min(latest);
        let lag = |ns: Nanos| if ns.0 == 0 { 0 } else { ns.0 + latest - earlier };
        let cost = cost.min(capacity);
        let (back, still) = (queue.clone().try_acquire(Nanos(earlier), cost).unwrap(),
                             queue.clone().try_acquire(Nanos(latest), cost).unwrap());
        prop_assert_eq!((back.allowed, back.remaining), (still.allowed, still.remaining));
        prop_assert_eq!(
            (back.retry_after.0, back.reset_after.0),
            (lag(still.retry_after), lag(still.reset_after))
        );
        let (back, still) = (queue.clone().reserve(Nanos(earlier), cost, Nanos::MAX).unwrap(),
                             queue.reserve(Nanos(latest), cost, Nanos::MAX).unwrap());
        // Booked behind the same queue: the wait from `earlier` adds the step.
        let unlag = |w: Nanos| w.0.saturating_sub(latest - earlier);
        prop_assert_eq!(
            back.map(unlag).map_err(|d| d.remaining),
            still.map(|w| w.0).map_err(|d| d.remaining)
        );
    }

    /// After a reconfigure, a request queued behind units still in the
    /// queue leaves the longer of the two intervals after the last of them.
    #[test]
    fn reconfigure_never_sends_sooner_than_either_interval(
        (capacity, interval) in config(),
        new_interval in 1u64..=1_000,
        at in 0u64..10_000,
    ) {
        let mut queue = LeakyBucket::new(capacity, Nanos(interval)).unwrap();
        let slots: Vec<u64> = (0..capacity)
            .map(|_| queue.reserve(Nanos(0), 1, Nanos::MAX).unwrap().unwrap().0)
            .collect();
        queue.reconfigure(Nanos(at), LeakyBucket::new(1 << 40, Nanos(new_interval)).unwrap());
        let wait = queue.reserve(Nanos(at), 1, Nanos::MAX).unwrap().unwrap().0;
        let last = *slots.last().unwrap();
        let expected = if last + interval > at { last + interval.max(new_interval) } else { at };
        prop_assert_eq!(at + wait, expected);
    }

    /// No input, however extreme, panics.
    #[test]
    fn extreme_inputs_never_panic(
        config in prop::collection::vec(extreme(), 4),
        calls in prop::collection::vec((extreme(), extreme(), 0..5u8), 1..20),
    ) {
        let build = |i: usize| LeakyBucket::new(config[i], Nanos(config[i + 1]));
        let (Ok(mut queue), Ok(new)) = (build(0), build(2)) else {
            return Ok(());
        };
        for &(now, x, op) in &calls {
            match op {
                0 => { let _ = queue.try_acquire(Nanos(now), x); }
                1 => { let _ = queue.peek(Nanos(now), x); }
                2 => { let _ = queue.reserve(Nanos(now), x % 4, Nanos(x)); }
                3 => queue.refund(Nanos(now), x),
                _ => queue.reconfigure(Nanos(now), new.clone()),
            }
        }
    }
}

#[test]
fn a_million_units_at_about_7_per_second_leave_exactly_on_time() {
    // 7 per second is not a whole number of ns apart; 142_857_143 ns is.
    let interval = 142_857_143;
    let mut queue = LeakyBucket::new(7, Nanos(interval)).unwrap();
    let (mut now, mut sent) = (0u64, 0u64);
    // Probe every 333_333_337 ns, never aligned with the interval, and fill
    // the queue each time: the line never runs dry, so unit k leaves at k * interval.
    while sent < 1_000_000 {
        let mut queued = 0;
        while let Ok(wait) = queue.reserve(Nanos(now), 1, Nanos::MAX).unwrap() {
            assert_eq!(now + wait.0, sent * interval);
            (sent, queued) = (sent + 1, queued + 1);
            assert!(queued <= 7, "more than the capacity queued at {now}");
        }
        now += 333_333_337;
    }
}
