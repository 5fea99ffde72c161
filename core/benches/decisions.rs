//! `try_acquire` of every algorithm, side by side with governor's direct GCRA
//! limiter in the same run, then a table of nanoseconds per decision and the
//! ratio to governor.
//!
//! ```text
//! cargo bench -p ratekeeper --features alloc --bench decisions
//! ```
//!
//! Every limiter is set to the same quota: one unit every `T` = 1 ms with a
//! burst of 10 (the windowed ones: 10 per 10 ms). Each iteration advances a
//! fake clock by the scenario's step and makes one decision of cost 1 at the
//! clock's time: ratekeeper's `try_acquire(clock.now(), 1)`, governor's
//! `check()` (which reads its clone of the same kind of clock). Both sides
//! pay the same clock work; the `clock` row measures that work alone, and the
//! "net" ratio takes it out of both.
//!
//! The clock is [`StepClock`], a plain shared cell implementing governor's
//! `Clock`. Governor's own `FakeRelativeClock` advances with an atomic
//! compare-exchange loop that costs about 20 ns on a small Xeon, several times
//! governor's whole decision, which would bury the comparison; the
//! `governor_fake_clock` row is governor driven by it, for reference.
//!
//! Scenarios (one criterion group each):
//! - `allowed`: the clock advances by `T` per call, so every call is allowed;
//! - `denied`: a limiter exhausted at the start, the clock still: every call
//!   is denied;
//! - `mixed`: a steady stream at twice the rate (the clock advances by
//!   `T / 2`): after the burst, every other call is allowed.
//!
//! Inlining: each side's `decide` wrapper is `#[inline(always)]`, so that
//! every decision is inlined into criterion's timing loop as it would be
//! into a caller's own loop. Governor's check always was; ratekeeper's, one
//! generic wrapper further down, was left as a call by LLVM's size limit,
//! and criterion then copied its 48-byte result with 16-byte loads that
//! stalled on the call's 8-byte stores (a failed store forwarding, some
//! 15 cycles): a cost of the harness, not of the decision.
//!
//! Before timing, each limiter replays 10,000 calls of its scenario untimed:
//! the table shows the share allowed and whether the decisions are exactly
//! governor's (they must be for the token buckets and GCRA, which enforce the
//! same quota).

use std::cell::Cell;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, SystemTime};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion};
use governor::clock::{Clock, FakeRelativeClock};
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos as GovernorNanos;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use ratekeeper::{
    Bandwidth, Decision, Error, FixedWindow, Gcra, LeakyBucket, Limiter, Nanos,
    SlidingWindowCounter, SlidingWindowLog, TokenBucket,
};

/// The emission interval: 1,000 units per second.
const T: u64 = 1_000_000;
/// The most units admitted at once.
const BURST: u64 = 10;
/// Untimed calls replayed per limiter and scenario for the table.
const REPLAY: usize = 10_000;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scenario {
    Allowed,
    Denied,
    Mixed,
}

impl Scenario {
    const ALL: [Scenario; 3] = [Scenario::Allowed, Scenario::Denied, Scenario::Mixed];

    fn name(self) -> &'static str {
        match self {
            Scenario::Allowed => "allowed",
            Scenario::Denied => "denied",
            Scenario::Mixed => "mixed",
        }
    }

    /// How far the clock moves before each call, in ns.
    fn step(self) -> u64 {
        match self {
            Scenario::Allowed => T,
            Scenario::Denied => 0,
            Scenario::Mixed => T / 2,
        }
    }
}

/// A fake clock: nanoseconds in a cell shared by its clones.
#[derive(Clone, Debug, Default)]
struct StepClock(Rc<Cell<u64>>);

impl Clock for StepClock {
    type Instant = GovernorNanos;

    #[inline]
    fn now(&self) -> GovernorNanos {
        GovernorNanos::from(self.0.get())
    }
}

/// A clock that both a governor limiter and the bench loop can drive.
trait FakeClock: Clock<Instant = GovernorNanos> + Clone + Default {
    fn advance_ns(&self, ns: u64);
}

impl FakeClock for StepClock {
    #[inline]
    fn advance_ns(&self, ns: u64) {
        self.0.set(self.0.get() + ns);
    }
}

impl FakeClock for FakeRelativeClock {
    #[inline]
    fn advance_ns(&self, ns: u64) {
        self.advance(Duration::from_nanos(ns));
    }
}

/// A limiter under test, deciding one unit at its clock's time.
trait Subject {
    type Outcome;
    fn advance(&self, ns: u64);
    fn decide(&mut self) -> Self::Outcome;
    fn allowed(outcome: &Self::Outcome) -> bool;
}

struct Ours<L> {
    limiter: L,
    clock: StepClock,
}

fn ours<L: Limiter>(limiter: L) -> Ours<L> {
    Ours {
        limiter,
        clock: StepClock::default(),
    }
}

impl<L: Limiter> Subject for Ours<L> {
    type Outcome = Result<Decision, Error>;

    #[inline]
    fn advance(&self, ns: u64) {
        self.clock.advance_ns(ns);
    }

    // Always inlined, on both sides; see "Inlining" at the top.
    #[inline(always)]
    fn decide(&mut self) -> Self::Outcome {
        let now = Nanos(self.clock.now().as_u64());
        self.limiter.try_acquire(now, 1)
    }

    fn allowed(outcome: &Self::Outcome) -> bool {
        outcome.as_ref().is_ok_and(|d| d.allowed)
    }
}

/// Governor's direct (single-key, in-memory) limiter with the same quota.
struct Governor<C: FakeClock> {
    limiter: RateLimiter<NotKeyed, InMemoryState, C, NoOpMiddleware<GovernorNanos>>,
    clock: C,
}

impl<C: FakeClock> Governor<C> {
    fn new() -> Governor<C> {
        let quota = Quota::with_period(Duration::from_nanos(T))
            .expect("T is not zero")
            .allow_burst(NonZeroU32::new(BURST as u32).expect("BURST is not zero"));
        let clock = C::default();
        Governor {
            limiter: RateLimiter::direct_with_clock(quota, clock.clone()),
            clock,
        }
    }
}

impl<C: FakeClock> Subject for Governor<C> {
    type Outcome = Result<(), governor::NotUntil<GovernorNanos>>;

    #[inline]
    fn advance(&self, ns: u64) {
        self.clock.advance_ns(ns);
    }

    // Always inlined, on both sides; see "Inlining" at the top.
    #[inline(always)]
    fn decide(&mut self) -> Self::Outcome {
        self.limiter.check()
    }

    fn allowed(outcome: &Self::Outcome) -> bool {
        outcome.is_ok()
    }
}

/// Puts a new subject in the scenario's starting state: exhausted for
/// `denied` (calls at the start time until one is denied).
fn start<S: Subject>(mut subject: S, scenario: Scenario) -> S {
    if scenario == Scenario::Denied {
        let mut calls = 0;
        while S::allowed(&subject.decide()) {
            calls += 1;
            assert!(calls < 1_000_000, "the limiter never denies");
        }
    }
    subject
}

/// Which of `REPLAY` calls of the scenario a new subject allows.
fn replay<S: Subject>(subject: S, scenario: Scenario) -> Vec<bool> {
    let mut subject = start(subject, scenario);
    let step = scenario.step();
    (0..REPLAY)
        .map(|_| {
            subject.advance(step);
            S::allowed(&subject.decide())
        })
        .collect()
}

/// What the table shows beside the timings: the share of calls allowed and
/// whether the decisions are governor's.
struct Replayed {
    scenario: Scenario,
    name: &'static str,
    allowed: f64,
    same_as_governor: bool,
}

fn bench<S: Subject>(
    group: &mut BenchmarkGroup<WallTime>,
    replayed: &mut Vec<Replayed>,
    scenario: Scenario,
    name: &'static str,
    make: impl Fn() -> S,
) {
    let pattern = replay(make(), scenario);
    let reference = replay(Governor::<StepClock>::new(), scenario);
    replayed.push(Replayed {
        scenario,
        name,
        allowed: pattern.iter().filter(|&&a| a).count() as f64 / REPLAY as f64,
        same_as_governor: pattern == reference,
    });

    let mut subject = start(make(), scenario);
    let step = scenario.step();
    group.bench_function(name, |b| {
        b.iter(|| {
            subject.advance(step);
            subject.decide()
        })
    });
}

fn bench_scenario(c: &mut Criterion, replayed: &mut Vec<Replayed>, scenario: Scenario) {
    let window = Nanos(BURST * T);
    let interval = Nanos(T);
    let mut g = c.benchmark_group(scenario.name());
    let group = &mut g;

    bench(
        group,
        replayed,
        scenario,
        "governor",
        Governor::<StepClock>::new,
    );
    bench(group, replayed, scenario, "token_bucket", || {
        ours(TokenBucket::new(BURST, 1, interval).expect("valid"))
    });
    // A second, looser bandwidth (100,000 per minute) that never binds here,
    // so the decisions stay governor's while the bucket does twice the work.
    bench(group, replayed, scenario, "token_bucket_2", || {
        ours(
            TokenBucket::from_bandwidths([
                Bandwidth::greedy(BURST, 1, interval).expect("valid"),
                Bandwidth::greedy(100_000, 100_000, Nanos::from_secs(60)).expect("valid"),
            ])
            .expect("valid"),
        )
    });
    bench(group, replayed, scenario, "gcra", || {
        ours(Gcra::new(BURST, interval).expect("valid"))
    });
    bench(group, replayed, scenario, "leaky_bucket", || {
        ours(LeakyBucket::new(BURST, interval).expect("valid"))
    });
    bench(group, replayed, scenario, "fixed_window", || {
        ours(FixedWindow::new(BURST, window).expect("valid"))
    });
    bench(group, replayed, scenario, "sliding_window_counter", || {
        ours(SlidingWindowCounter::new(BURST, window).expect("valid"))
    });
    bench(group, replayed, scenario, "sliding_window_log", || {
        ours(SlidingWindowLog::new(BURST, window).expect("valid"))
    });

    bench(group, replayed, scenario, "governor_fake_clock", || {
        Governor::<FakeRelativeClock>::new()
    });

    // The clock work alone, which every row but the one above includes.
    let clock = StepClock::default();
    let step = scenario.step();
    g.bench_function("clock", |b| {
        b.iter(|| {
            clock.advance_ns(step);
            black_box(clock.now())
        })
    });
    g.finish();
}

fn main() {
    let started = SystemTime::now();
    // Short runs: the machine is small and often shared with builds.
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50)
        .configure_from_args();
    let mut replayed = Vec::new();
    for scenario in Scenario::ALL {
        bench_scenario(&mut c, &mut replayed, scenario);
    }
    c.final_summary();
    print_table(started, &replayed);
}

/// Criterion's output directory, found the way criterion finds it:
/// `$CRITERION_HOME`, else `$CARGO_TARGET_DIR/criterion`, else the
/// `criterion` folder of the target directory holding this executable.
fn criterion_dir() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return Some(home.into());
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        return Some(Path::new(&target).join("criterion"));
    }
    let exe = std::env::current_exe().ok()?;
    exe.ancestors()
        .map(|dir| dir.join("criterion"))
        .find(|dir| dir.is_dir())
}

/// A bench's time per iteration (criterion's slope estimate, else its mean)
/// in ns, with its confidence interval, if it was measured by this run.
fn estimate(dir: &Path, group: &str, bench: &str, since: SystemTime) -> Option<(f64, f64, f64)> {
    let path = dir.join(group).join(bench).join("new/estimates.json");
    let modified = std::fs::metadata(&path).ok()?.modified().ok()?;
    if modified < since {
        return None;
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    let e = json
        .get("slope")
        .filter(|s| !s.is_null())
        .or(json.get("mean"))?;
    let ci = e.get("confidence_interval")?;
    Some((
        e.get("point_estimate")?.as_f64()?,
        ci.get("lower_bound")?.as_f64()?,
        ci.get("upper_bound")?.as_f64()?,
    ))
}

fn print_table(started: SystemTime, replayed: &[Replayed]) {
    let Some(dir) = criterion_dir() else {
        return;
    };
    let mut lines = Vec::new();
    for scenario in Scenario::ALL {
        let group = scenario.name();
        let time = |bench: &str| estimate(&dir, group, bench, started);
        let (governor, clock) = (time("governor"), time("clock"));
        for r in replayed.iter().filter(|r| r.scenario == scenario) {
            let Some((ns, lo, hi)) = time(r.name) else {
                continue;
            };
            let ratio = governor.map_or("-".into(), |(g, _, _)| format!("{:.2}x", ns / g));
            // The ratio without the clock work both sides share, when that
            // leaves a meaningful governor time.
            let net = match (governor, clock) {
                (Some((g, _, _)), Some((k, _, _))) if g - k > 0.5 => {
                    format!("{:.2}x", (ns - k).max(0.0) / (g - k))
                }
                _ => "-".into(),
            };
            lines.push(format!(
                "{group:<8} {:<23} {ns:>7.2} [{lo:>6.2} {hi:>6.2}] {ratio:>8} {net:>8} {:>8.1}% {:>6}",
                r.name,
                100.0 * r.allowed,
                if r.same_as_governor { "yes" } else { "no" },
            ));
        }
        if let Some((k, lo, hi)) = clock {
            lines.push(format!(
                "{group:<8} {:<23} {k:>7.2} [{lo:>6.2} {hi:>6.2}]",
                "(clock only)"
            ));
        }
    }
    if lines.is_empty() {
        return; // nothing measured by this run (test mode, or a filter)
    }
    println!();
    println!("try_acquire, ns per decision: criterion's estimate [95% CI], this run");
    println!("/gov: ns / governor's ns; net/gov: the same, less the clock-only ns from both");
    println!(
        "allowed, =gov: share allowed in an untimed replay, and decisions equal to governor's"
    );
    println!(
        "{:<8} {:<23} {:>7} {:^15} {:>8} {:>8} {:>9} {:>6}",
        "scenario", "limiter", "ns", "[95% CI]", "/gov", "net/gov", "allowed", "=gov"
    );
    for line in lines {
        println!("{line}");
    }
}
