//! Portable state: round trips, decoding of arbitrary bytes, and a limiter's
//! state staying its own when it takes another's configuration.

use proptest::prelude::*;
use ratekeeper::{
    AnyLimiter, Bandwidth, Calendar, FixedWindow, Gcra, LeakyBucket, Limiter, Nanos, Portable,
    SlidingWindowCounter, SlidingWindowLog, TokenBucket, MAX_LOG_LIMIT, MAX_STATE_LEN,
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

/// Gives `subject` the configuration of `new`, of the same algorithm.
fn reconfigure(subject: &mut Subject, now: Nanos, new: Subject) {
    match (subject, new) {
        (Subject::Gcra(l), Subject::Gcra(n)) => l.reconfigure(now, n),
        (Subject::Bucket(l), Subject::Bucket(n)) => l.reconfigure(now, n),
        (Subject::Buckets(l), Subject::Buckets(n)) => l.reconfigure(now, n),
        (Subject::Leaky(l), Subject::Leaky(n)) => l.reconfigure(now, n),
        (Subject::Log(l), Subject::Log(n)) => l.reconfigure(now, n),
        (Subject::Fixed(l), Subject::Fixed(n)) => l.reconfigure(now, n),
        (Subject::Counter(l), Subject::Counter(n)) => l.reconfigure(now, n),
        _ => unreachable!("one algorithm"),
    }
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
    /// panic, and whatever is accepted then decides without panicking
    /// (overflow checks are on in tests).
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

/// Another configuration of `subject`'s algorithm (and, for a window,
/// of its kind of windows), to reconfigure to.
fn other(subject: &Subject) -> Subject {
    match subject {
        Subject::Gcra(_) => Subject::Gcra(Gcra::new(2, Nanos(70)).unwrap()),
        Subject::Bucket(_) => Subject::Bucket(TokenBucket::new(5, 1, Nanos(40)).unwrap()),
        Subject::Buckets(_) => Subject::Buckets(
            TokenBucket::from_bandwidths([
                Bandwidth::interval(2, 1, Nanos(90)).unwrap(),
                Bandwidth::greedy(4, 3, Nanos(500)).unwrap(),
            ])
            .unwrap(),
        ),
        Subject::Leaky(_) => Subject::Leaky(LeakyBucket::new(2, Nanos(230)).unwrap()),
        Subject::Log(_) => Subject::Log(SlidingWindowLog::new(2, Nanos(400)).unwrap()),
        Subject::Fixed(l) if l.calendar().is_some() => {
            Subject::Fixed(FixedWindow::with_calendar(2, Calendar::Week).unwrap())
        }
        Subject::Fixed(_) => Subject::Fixed(FixedWindow::new(2, Nanos(400)).unwrap()),
        Subject::Counter(l) if l.calendar().is_some() => {
            Subject::Counter(SlidingWindowCounter::with_calendar(2, Calendar::Day).unwrap())
        }
        Subject::Counter(_) => Subject::Counter(SlidingWindowCounter::new(2, Nanos(400)).unwrap()),
    }
}

proptest! {
    /// The state a reconfigure leaves (a window's or a queue's refund
    /// bound, written as version 2, included) round trips, and every strict
    /// prefix is refused as truncated: a prefix without the bound read as a
    /// state never reconfigured, whose refunds give back units the counts
    /// carried over no longer hold. Read as the other version, the bytes are
    /// refused or mean the same state.
    #[test]
    fn reconfigured_state_round_trips(before in ops(), gap in 0u64..300, after in ops()) {
        for make in limiters().iter_mut() {
            let mut original = make();
            drive(&mut original, &before, 0);
            let now = before.iter().map(|op| op.0).sum::<u64>() + gap;
            let target = other(&original);
            reconfigure(&mut original, Nanos(now), target.clone());
            drive(&mut original, &after, now);
            let bytes = on!(&original, l => l.to_bytes());
            let mut restored = target.clone();
            on!(&mut restored, l => l.restore(&bytes)).unwrap();
            prop_assert_eq!(&restored, &original);
            for cut in 0..bytes.len() {
                let mut into = target.clone();
                let result = on!(&mut into, l => l.restore(&bytes[..cut]));
                prop_assert_eq!(result.map_err(|e| e.code()), Err("state_truncated"), "{} of {:?}", cut, bytes);
                prop_assert_eq!(&into, &target);
            }
            let mut flipped = bytes.clone();
            flipped[2] = 3 - flipped[2];
            let mut into = target.clone();
            match on!(&mut into, l => l.restore(&flipped)) {
                Ok(()) => prop_assert_eq!(&into, &original),
                Err(_) => prop_assert_eq!(&into, &target),
            }
        }
    }
}

proptest! {
    /// A valid encoding (of a state reconfigured or not) with bytes
    /// replaced, inserted or removed never panics to restore: it is refused,
    /// leaving the limiter as it was, or read as a state that decides,
    /// reconfigures and refunds without panicking and encodes to bytes that
    /// restore to it again.
    #[test]
    fn mutated_encodings_never_panic(
        before in ops(),
        reconfigured in any::<bool>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..4),
        after in ops(),
    ) {
        for make in limiters().iter_mut() {
            let mut original = make();
            drive(&mut original, &before, 0);
            let now = before.iter().map(|op| op.0).sum::<u64>();
            let blank = if reconfigured { other(&original) } else { make() };
            if reconfigured {
                reconfigure(&mut original, Nanos(now), blank.clone());
            }
            let mut bytes = on!(&original, l => l.to_bytes());
            for &(at, byte, edit) in &edits {
                let i = at.index(bytes.len() + 1);
                match edit {
                    0 if i < bytes.len() => bytes[i] = byte,
                    1 => bytes.insert(i, byte),
                    _ if i < bytes.len() => drop(bytes.remove(i)),
                    _ => {}
                }
            }
            let mut subject = blank.clone();
            if on!(&mut subject, l => l.restore(&bytes)).is_err() {
                prop_assert_eq!(&subject, &blank);
                continue;
            }
            let encoded = on!(&subject, l => l.to_bytes());
            let mut again = blank.clone();
            on!(&mut again, l => l.restore(&encoded)).unwrap();
            prop_assert_eq!(&again, &subject);
            for at in [Nanos(now), Nanos::MAX] {
                let mut copy = subject.clone();
                on!(&mut copy, l => {
                    let _ = l.try_acquire(at, 1);
                    let _ = l.reserve(at, 2, Nanos::MAX);
                    l.refund(at, 1);
                });
                reconfigure(&mut copy, at, blank.clone());
                drive(&mut copy, &after, at.0.min(now));
            }
        }
    }
}

proptest! {
    /// A failed restore leaves a used limiter as it was, through the
    /// algorithm's own type and an `AnyLimiter`, wherever the bytes fail:
    /// cut at every point, each byte replaced, a byte after the last field.
    /// Restoring checks all the bytes before it writes any field, a log's
    /// late entries and the trailing bytes included (it no longer reads
    /// into a copy of the limiter, which for a log is its whole ring).
    #[test]
    fn a_failed_restore_changes_nothing(mine in ops(), theirs in ops(), reconfigured in any::<bool>()) {
        let mut subjects = limiters();
        // A log of many entries (a unit an instant, a window of all the
        // steps), so that bytes fail late in them.
        subjects.push(Box::new(|| Subject::Log(SlidingWindowLog::new(64, Nanos(1 << 20)).unwrap())));
        for make in subjects.iter_mut() {
            let mut target = make();
            drive(&mut target, &mine, 0);
            let mut source = make();
            drive(&mut source, &theirs, 0);
            if reconfigured {
                // Version 2 with a refund bound, for the windows and the queue.
                let now = theirs.iter().map(|op| op.0).sum::<u64>();
                let smaller = other(&source);
                reconfigure(&mut source, Nanos(now), smaller);
                reconfigure(&mut source, Nanos(now), make());
            }
            let bytes = on!(&source, l => l.to_bytes());
            let mut inputs: Vec<Vec<u8>> = (0..bytes.len()).map(|cut| bytes[..cut].to_vec()).collect();
            inputs.push([&bytes[..], &[0]].concat());
            for i in 0..bytes.len() {
                for b in [0x00, 0x01, 0x7f, 0x80, 0xff, bytes[i] ^ 0x80, bytes[i].wrapping_add(1)] {
                    let mut bad = bytes.clone();
                    bad[i] = b;
                    inputs.push(bad);
                }
            }
            for input in &inputs {
                let mut subject = target.clone();
                let typed = on!(&mut subject, l => l.restore(input));
                let mut any = on!(target.clone(), l => AnyLimiter::from(l));
                let before = any.clone();
                prop_assert_eq!(&any.restore(input), &typed, "{:?}", input);
                match typed {
                    Err(_) => {
                        prop_assert_eq!(&subject, &target, "{:?}", input);
                        prop_assert_eq!(&any, &before, "{:?}", input);
                    }
                    // Read as a state: the same one both ways.
                    Ok(()) => prop_assert_eq!(on!(&subject, l => l.to_bytes()), any.to_bytes()),
                }
            }
        }
    }
}

proptest! {
    /// `reconfigure` takes only the configuration of the limiter it is
    /// given: a used one, or the limiter itself, leaves the same state as a
    /// new one.
    #[test]
    fn reconfigure_takes_only_the_configuration(before in ops(), theirs in ops(), after in ops()) {
        for make in limiters().iter_mut() {
            let mut original = make();
            drive(&mut original, &before, 0);
            let now = before.iter().map(|op| op.0).sum::<u64>();
            let mut expected = original.clone();
            reconfigure(&mut expected, Nanos(now), make());
            let mut used = make();
            drive(&mut used, &theirs, 0);
            for other in [used, original.clone()] {
                let mut subject = original.clone();
                reconfigure(&mut subject, Nanos(now), other);
                prop_assert_eq!(&subject, &expected);
                prop_assert_eq!(drive(&mut subject, &after, now), drive(&mut expected.clone(), &after, now));
            }
        }
    }
}

/// Every state of up to five fields drawn from the extremes (0, small
/// counts, a window, the largest values), after a valid header: none
/// panics to decode or to decide from, whatever the algorithm. Random bytes
/// seldom spell these.
#[test]
fn extreme_numbers_never_panic() {
    const NUMBERS: [u64; 8] = [0, 1, 2, 3, 250, 1 << 63, u64::MAX - 1, u64::MAX];
    let ops: Vec<Op> = vec![(0, 1, false), (1, 3, false), (0, 2, true), (300, 1, false)];
    for make in limiters().iter_mut() {
        let header = on!(&make(), l => l.to_bytes())[..8].to_vec();
        for len in 0..=5u32 {
            for pick in 0..NUMBERS.len().pow(len) {
                let mut bytes = header.clone();
                let mut rest = pick;
                for _ in 0..len {
                    let mut n = NUMBERS[rest % NUMBERS.len()];
                    rest /= NUMBERS.len();
                    while n >= 0x80 {
                        bytes.push(n as u8 | 0x80);
                        n >>= 7;
                    }
                    bytes.push(n as u8);
                }
                let mut subject = make();
                if on!(&mut subject, l => l.restore(&bytes)).is_ok() {
                    drive(&mut subject, &ops, 0);
                    drive(&mut subject, &ops, u64::MAX - 301);
                }
            }
        }
    }
}

/// A log's entry of 2^64 - 1 units made the next sum wrap, and the log
/// admitted past its limit: every sum now saturates or is checked, and such
/// an entry only fills the window.
#[test]
fn a_log_entry_of_any_size_only_fills_the_window() {
    let log = SlidingWindowLog::new(2, Nanos(250)).unwrap();
    let header = log.to_bytes()[..8].to_vec();
    // latest 0, one entry: at 0, of 2^64 - 1 units.
    let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
    let mut restored = log.clone();
    restored
        .restore(&[header.clone(), vec![0, 1, 0], max.to_vec()].concat())
        .unwrap();
    for t in [0, 10, 249] {
        assert!(!restored.try_acquire(Nanos(t), 1).unwrap().allowed);
        // Booked no earlier than the entry leaves, or refused (the units
        // held would pass 2^64 - 1).
        let booked = restored.clone().reserve(Nanos(t), 2, Nanos(1_000)).unwrap();
        assert!(
            booked.is_err() || booked == Ok(Nanos(250 - t)),
            "{booked:?}"
        );
    }
    assert!(restored.try_acquire(Nanos(250), 2).unwrap().allowed);
    // Two entries past 2^64 - 1 units in all are refused.
    let two = [header, vec![0, 2, 0], max.to_vec(), vec![1, 1]].concat();
    assert_eq!(
        log.clone().restore(&two).unwrap_err().code(),
        "state_corrupt"
    );
}

/// A log holds at most `2 * limit` entries, its ring's room: a state with
/// more is corrupt (reading one more entry into the ring would panic).
#[test]
fn a_log_state_with_more_entries_than_its_ring_holds_is_corrupt() {
    let log = SlidingWindowLog::new(1, Nanos(250)).unwrap();
    let header = log.to_bytes()[..8].to_vec();
    // Latest 2, then the entries: (time after the previous one, units).
    let two = [header.clone(), vec![2, 2, 0, 1, 1, 1]].concat();
    let mut restored = log.clone();
    restored.restore(&two).unwrap();
    let three = [header, vec![2, 3, 0, 1, 1, 1, 1, 1]].concat();
    let mut refused = log.clone();
    assert_eq!(refused.restore(&three).unwrap_err().code(), "state_corrupt");
    assert_eq!(refused, log);
}

/// Entries keep their whole cost through a reconfigure to a smaller limit,
/// so that a refund gives back from what was really taken: capped at the
/// new limit, 10 units taken became 5, and after 3 came back 2 more fit in
/// a window that had seen 10.
#[test]
fn a_log_reconfigured_smaller_refunds_from_what_was_taken() {
    let mut log = SlidingWindowLog::new(10, Nanos(1_000)).unwrap();
    assert!(log.try_acquire(Nanos(0), 10).unwrap().allowed);
    log.reconfigure(Nanos(0), SlidingWindowLog::new(5, Nanos(1_000)).unwrap());
    log.refund(Nanos(0), 3);
    assert!(!log.try_acquire(Nanos(3), 2).unwrap().allowed);
}

/// The state a reconfigure to a smaller limit leaves, entries above the
/// new limit included, encodes and decodes.
#[test]
fn a_log_reconfigured_smaller_still_round_trips() {
    let mut log = SlidingWindowLog::new(100, Nanos(1_000)).unwrap();
    assert!(log.try_acquire(Nanos(10), 60).unwrap().allowed);
    assert!(log.try_acquire(Nanos(20), 30).unwrap().allowed);
    log.reconfigure(Nanos(30), SlidingWindowLog::new(2, Nanos(1_000)).unwrap());
    let mut restored = SlidingWindowLog::new(2, Nanos(1_000)).unwrap();
    restored.restore(&log.to_bytes()).unwrap();
    assert_eq!(restored, log);
    // Both entries still fill the window: nothing before the newest leaves.
    let denied = log.try_acquire(Nanos(30), 1).unwrap();
    assert!(!denied.allowed);
    assert_eq!(denied.retry_after, Nanos(1_020 - 30));
}

#[test]
fn headers_are_checked() {
    let gcra = Gcra::new(3, Nanos(100)).unwrap();
    let good = gcra.to_bytes();
    let code = |bytes: &[u8]| gcra.clone().restore(bytes).unwrap_err().code();
    let mut bad = good.clone();
    bad[0] = b'x';
    assert_eq!(code(&bad), "state_corrupt");
    for version in [0, 9] {
        let mut bad = good.clone();
        bad[2] = version;
        assert_eq!(code(&bad), "state_version");
    }
    let leaky = LeakyBucket::new(3, Nanos(100)).unwrap().to_bytes();
    assert_eq!(code(&leaky), "state_mismatch"); // another algorithm
    let other = Gcra::new(3, Nanos(101)).unwrap().to_bytes();
    assert_eq!(code(&other), "state_mismatch"); // another configuration
    assert_eq!(code(&[good.clone(), vec![0]].concat()), "state_corrupt"); // trailing
    let mut overlong = good[..8].to_vec();
    overlong.extend([0xff; 10]);
    assert_eq!(code(&overlong), "state_corrupt");
    // 2^64 in ten bytes, the last one 2: its bit falls off a u64.
    let mut past = good[..8].to_vec();
    past.extend([0x80; 9]);
    past.extend([0x02, 0x00]);
    assert_eq!(code(&past), "state_corrupt");
}

/// A fixed window reconfigured to a lower limit holds a refund bound; its
/// state cut before the bound was restored as one never reconfigured, and a
/// refund of a unit taken before the reconfigure then admitted a third unit
/// under a limit of 2.
#[test]
fn a_state_cut_before_its_refund_bound_is_truncated() {
    let mut l = FixedWindow::new(4, Nanos(100)).unwrap();
    assert!(l.try_acquire(Nanos(10), 2).unwrap().allowed);
    assert!(l.try_acquire(Nanos(20), 1).unwrap().allowed);
    l.reconfigure(Nanos(20), FixedWindow::new(2, Nanos(100)).unwrap());
    let bytes = l.to_bytes();
    assert_eq!(bytes[2], 2);
    let fresh = FixedWindow::new(2, Nanos(100)).unwrap();
    let mut restored = fresh.clone();
    let cut = &bytes[..bytes.len() - 1];
    assert_eq!(restored.restore(cut).unwrap_err().code(), "state_truncated");
    assert_eq!(restored, fresh);
    restored.restore(&bytes).unwrap();
    restored.refund(Nanos(20), 1);
    assert!(!restored.try_acquire(Nanos(30), 1).unwrap().allowed);
    // A version-1 header followed by a bound is not a version-1 state.
    let mut v1 = bytes.clone();
    v1[2] = 1;
    assert_eq!(
        fresh.clone().restore(&v1).unwrap_err().code(),
        "state_corrupt"
    );
}

/// A token bucket's state says whether it has been called; one never called
/// holds its initial tokens, none spent and none owed. A state never called
/// yet spent was restored, then read as never called where that matters: a
/// refund gave nothing back to it, and a reconfigure, even to the same
/// configuration, replaced it with a full bucket, forgetting its debt.
#[test]
fn a_bucket_never_called_yet_spent_is_corrupt() {
    let fresh = TokenBucket::new(3, 1, Nanos(100)).unwrap();
    let header = fresh.to_bytes()[..8].to_vec();
    // Never called; bands: (tokens, owed, carry).
    for band in [[0, 5, 0], [1, 0, 0], [3, 0, 0]] {
        let bytes = [header.clone(), vec![0], band.to_vec()].concat();
        let mut restored = fresh.clone();
        let result = restored.restore(&bytes).map_err(|e| e.code());
        if band == [3, 0, 0] {
            // A new bucket: its initial tokens, the capacity.
            assert_eq!(result, Ok(()));
        } else {
            assert_eq!(result, Err("state_corrupt"), "{band:?}");
        }
        assert_eq!(restored, fresh);
    }
    // Starting short: only its initial tokens.
    let short = TokenBucket::with_initial_tokens(3, 1, Nanos(100), 1).unwrap();
    let header = short.to_bytes()[..8].to_vec();
    for (tokens, ok) in [(0, false), (1, true), (3, false)] {
        let bytes = [header.clone(), vec![0, tokens, 0, 0]].concat();
        let result = short.clone().restore(&bytes).map_err(|e| e.code());
        assert_eq!(result.is_ok(), ok, "{tokens} tokens: {result:?}");
    }
}

/// A called bucket's band holds what its arithmetic relies on, and what a
/// state read from bytes must hold too: debt only in an empty band, no
/// carry in a full greedy band (it would bring the next token early), and
/// the flag that says whether the bucket was called is 0 or 1. A band
/// holding tokens and debt at once answered `remaining` 2 and denied 2.
#[test]
fn a_bucket_state_no_bucket_holds_is_corrupt() {
    let bucket = TokenBucket::new(3, 1, Nanos(100)).unwrap();
    let header = bucket.to_bytes()[..8].to_vec();
    // The flag, the time of the latest call (0), then the band: tokens,
    // owed, carry.
    for (state, ok) in [
        ([1, 0, 2, 3, 0], false),
        ([1, 0, 2, 0, 50], true),
        // The carry is below a step (100 ns for a token per 100 ns): a
        // whole step carried is a token the band should hold.
        ([1, 0, 2, 0, 99], true),
        ([1, 0, 2, 0, 100], false),
        ([1, 0, 0, 3, 50], true),
        ([1, 0, 3, 0, 50], false),
        ([1, 0, 3, 0, 0], true),
        ([2, 0, 3, 0, 0], false),
    ] {
        let mut restored = bucket.clone();
        let result = restored.restore(&[header.clone(), state.to_vec()].concat());
        match ok {
            true => assert_eq!(result, Ok(()), "{state:?}"),
            false => {
                assert_eq!(
                    result.map_err(|e| e.code()),
                    Err("state_corrupt"),
                    "{state:?}"
                );
                assert_eq!(restored, bucket);
            }
        }
    }
}

/// Input shorter than a header is truncated only when it starts as a state
/// does; anything else (a JSON text read by mistake) is corrupt.
#[test]
fn short_input_that_is_no_state_is_corrupt() {
    let mut l = Gcra::new(3, Nanos(100)).unwrap();
    for (bytes, code) in [
        (&b""[..], "state_truncated"),
        (b"r", "state_truncated"),
        (b"rk\x01", "state_truncated"),
        (b"{}", "state_corrupt"),
        (b"x", "state_corrupt"),
        (b"rx\x01\x02", "state_corrupt"),
    ] {
        assert_eq!(l.restore(bytes).unwrap_err().code(), code, "{bytes:?}");
    }
}

/// A number spelt longer than it needs (`80 00` for 0) is corrupt: the bytes
/// a state is read from are the bytes it writes back.
#[test]
fn numbers_in_a_longer_form_than_needed_are_corrupt() {
    let mut l = Gcra::new(3, Nanos(100)).unwrap();
    let _ = l.try_acquire(Nanos(1_000), 1).unwrap();
    let bytes = l.to_bytes();
    let mut fresh = Gcra::new(3, Nanos(100)).unwrap();
    fresh.restore(&bytes).unwrap();
    assert_eq!(fresh.to_bytes(), bytes);
    // The last field (a small number, one byte) spelt in two.
    let last = *bytes.last().unwrap();
    assert!(last < 0x80);
    let mut long = bytes[..bytes.len() - 1].to_vec();
    long.extend([last | 0x80, 0x00]);
    assert_eq!(fresh.restore(&long).unwrap_err().code(), "state_corrupt");
}

/// A GCRA's state is its header (8 bytes) and two varints of 1 to 10 bytes
/// each: a buffer of 28 bytes holds any, which `encode` into a buffer of
/// the caller's (no allocation) needs to know. Unix-epoch times alone take
/// 9 bytes from 2^56 ns (2.3 years) on, so 21 bytes do not hold every
/// state of today.
#[test]
fn a_gcra_state_takes_10_to_28_bytes() {
    let fresh = Gcra::new(3, Nanos::from_secs(1)).unwrap();
    assert_eq!(fresh.encoded_len(), 10);
    let mut today = Gcra::new(86_400, Nanos::from_secs(1)).unwrap();
    let _ = today
        .try_acquire(Nanos(1_700_000_000_000_000_000), 86_400)
        .unwrap();
    assert_eq!(today.encoded_len(), 8 + 9 + 7);
    let far = Nanos(1 << 63);
    let mut largest = Gcra::new(1, far).unwrap();
    let _ = largest.try_acquire(far, 1).unwrap();
    assert_eq!(largest.encoded_len(), 28);
    let mut buffer = [0u8; 28];
    assert_eq!(largest.encode(&mut buffer), Ok(28));
    assert_eq!(largest.encode(&mut buffer[..21]), Err(28));
}

/// Input past `MAX_STATE_LEN` bytes is answered by its first
/// `MAX_STATE_LEN + 1` bytes, which is all the WebAssembly build copies into
/// its memory (a state of 2 GiB or more could not go there at all): a state
/// followed by more bytes, and a full log of the largest limit whose entries
/// go on past it, each read as far as it goes.
#[test]
fn input_past_max_state_len_is_answered_by_its_first_bytes() {
    let mut input = vec![0; MAX_STATE_LEN + 100];
    let mut subjects = limiters();
    subjects.push(Box::new(|| {
        Subject::Log(SlidingWindowLog::new(MAX_LOG_LIMIT, Nanos(u64::MAX)).unwrap())
    }));
    for make in subjects.iter_mut() {
        let mut subject = make();
        drive(&mut subject, &[(10, 1, false), (20, 2, true)], 0);
        let state = on!(&subject, l => l.to_bytes());
        input[..state.len()].copy_from_slice(&state);
        input[state.len()..].fill(0);
        let whole = on!(&mut make(), l => l.restore(&input));
        let first = on!(&mut make(), l => l.restore(&input[..MAX_STATE_LEN + 1]));
        assert_eq!(whole, first);
        assert_eq!(whole.unwrap_err().code(), "state_corrupt");
    }
    // A log of the largest limit holding its whole room of entries (2^21,
    // each one unit an instant after the last), then more bytes.
    let log = || SlidingWindowLog::new(MAX_LOG_LIMIT, Nanos(u64::MAX)).unwrap();
    let mut input = log().to_bytes()[..8].to_vec();
    input.extend([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]); // latest: 2^64 - 1
    input.extend([0x80, 0x80, 0x80, 0x01]); // length: 2^21
    while input.len() <= MAX_STATE_LEN + 100 {
        input.extend([0x01, 0x01]);
    }
    let whole = log().restore(&input);
    assert_eq!(whole, log().restore(&input[..MAX_STATE_LEN + 1]));
    assert_eq!(
        whole.unwrap_err(),
        ratekeeper::Error::StateCorrupt {
            reason: "bytes follow the last field"
        }
    );
}
