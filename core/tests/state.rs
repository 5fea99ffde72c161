//! Portable state: round trips, and decoding of arbitrary bytes.

use proptest::prelude::*;
use ratekeeper::{
    Bandwidth, Calendar, FixedWindow, Gcra, LeakyBucket, Limiter, Nanos, Portable,
    SlidingWindowCounter, SlidingWindowLog, TokenBucket,
};

/// One call: time step, cost, and whether it is a reservation.
type Op = (u64, u64, bool);

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec((0u64..300, 0u64..4, prop::bool::weighted(0.2)), 0..60)
}

/// The limiters under test, fresh; `ops` drive each before encoding.
fn limiters() -> Vec<Box<dyn FnMut() -> Subject>> {
    vec![
        Box::new(|| Subject::Gcra(Gcra::new(3, Nanos(100)).unwrap())),
        Box::new(|| Subject::Bucket(TokenBucket::new(3, 2, Nanos(150)).unwrap())),
        Box::new(|| {
            Subject::Buckets(
                TokenBucket::from_bandwidths([
                    Bandwidth::greedy(3, 7, Nanos(1_000)).unwrap(),
                    Bandwidth::interval(5, 2, Nanos(300))
                        .unwrap()
                        .with_initial_tokens(1)
                        .unwrap(),
                ])
                .unwrap(),
            )
        }),
        Box::new(|| Subject::Leaky(LeakyBucket::new(3, Nanos(100)).unwrap())),
        Box::new(|| Subject::Log(SlidingWindowLog::new(3, Nanos(250)).unwrap())),
        Box::new(|| Subject::Fixed(FixedWindow::new(3, Nanos(250)).unwrap())),
        Box::new(|| Subject::Fixed(FixedWindow::with_calendar(3, Calendar::Day).unwrap())),
        Box::new(|| Subject::Counter(SlidingWindowCounter::new(3, Nanos(250)).unwrap())),
        Box::new(|| {
            Subject::Counter(SlidingWindowCounter::with_calendar(3, Calendar::Month).unwrap())
        }),
    ]
}

#[derive(Clone, Debug, PartialEq)]
enum Subject {
    Gcra(Gcra),
    Bucket(TokenBucket),
    Buckets(TokenBucket<2>),
    Leaky(LeakyBucket),
    Log(SlidingWindowLog),
    Fixed(FixedWindow),
    Counter(SlidingWindowCounter),
}

macro_rules! on {
    ($s:expr, $l:ident => $body:expr) => {
        match $s {
            Subject::Gcra($l) => $body,
            Subject::Bucket($l) => $body,
            Subject::Buckets($l) => $body,
            Subject::Leaky($l) => $body,
            Subject::Log($l) => $body,
            Subject::Fixed($l) => $body,
            Subject::Counter($l) => $body,
        }
    };
}

fn drive(subject: &mut Subject, ops: &[Op], mut now: u64) -> Vec<String> {
    let mut answers = Vec::new();
    for &(step, cost, reserve) in ops {
        now += step;
        answers.push(on!(subject, l => if reserve {
            format!("{:?}", l.reserve(Nanos(now), cost, Nanos(500)))
        } else {
            format!("{:?}", l.try_acquire(Nanos(now), cost))
        }));
    }
    answers
}

proptest! {
    /// Encoding then restoring gives the same limiter, which then answers
    /// the same; every strict prefix is refused as truncated.
    #[test]
    fn state_round_trips(before in ops(), after in ops()) {
        for make in limiters().iter_mut() {
            let mut original = make();
            drive(&mut original, &before, 0);
            let bytes = on!(&original, l => l.to_bytes());
            prop_assert_eq!(bytes.len(), on!(&original, l => l.encoded_len()));
            let mut restored = make();
            on!(&mut restored, l => l.restore(&bytes)).unwrap();
            prop_assert_eq!(&restored, &original);
            let start = before.iter().map(|op| op.0).sum::<u64>();
            prop_assert_eq!(drive(&mut restored, &after, start), drive(&mut original, &after, start));
            for cut in 0..bytes.len() {
                let mut target = make();
                let err = on!(&mut target, l => l.restore(&bytes[..cut])).unwrap_err();
                prop_assert_eq!(err.code(), "state_truncated");
                prop_assert_eq!(&target, &make());
            }
        }
    }

    /// Arbitrary bytes (after a valid header, to reach the fields) never
    /// panic, and whatever is accepted then decides without panicking.
    #[test]
    fn arbitrary_bytes_never_panic(tail in prop::collection::vec(any::<u8>(), 0..40), ops in ops(), raw in any::<bool>()) {
        for make in limiters().iter_mut() {
            let mut subject = make();
            let header = on!(&subject, l => l.to_bytes())[..8].to_vec();
            let bytes = if raw { tail.clone() } else { [header, tail.clone()].concat() };
            if on!(&mut subject, l => l.restore(&bytes)).is_ok() {
                drive(&mut subject, &ops, 0);
            } else {
                prop_assert_eq!(&subject, &make());
            }
        }
    }
}

#[test]
fn headers_are_checked() {
    let gcra = Gcra::new(3, Nanos(100)).unwrap();
    let good = gcra.to_bytes();
    let code = |bytes: &[u8]| gcra.clone().restore(bytes).unwrap_err().code();
    let mut bad = good.clone();
    bad[0] = b'x';
    assert_eq!(code(&bad), "state_corrupt");
    let mut bad = good.clone();
    bad[2] = 9;
    assert_eq!(code(&bad), "state_version");
    let leaky = LeakyBucket::new(3, Nanos(100)).unwrap().to_bytes();
    assert_eq!(code(&leaky), "state_mismatch"); // another algorithm
    let other = Gcra::new(3, Nanos(101)).unwrap().to_bytes();
    assert_eq!(code(&other), "state_mismatch"); // another configuration
    assert_eq!(code(&[good.clone(), vec![0]].concat()), "state_corrupt"); // trailing
    let mut overlong = good[..8].to_vec();
    overlong.extend([0xff; 10]);
    assert_eq!(code(&overlong), "state_corrupt");
}
