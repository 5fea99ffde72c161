//! Runs the shared conformance vectors in `tests/vectors/` against the core.

use std::path::PathBuf;

use ratekeeper::{count_from_f64, Decision, Error, Nanos, SlidingWindowLog, TokenBucket};
use serde_json::{json, Map, Value};

enum Limiter {
    Bucket(TokenBucket),
    Log(SlidingWindowLog),
}

impl Limiter {
    fn try_acquire(&mut self, now: Nanos, cost: u64) -> Result<Decision, Error> {
        match self {
            Limiter::Bucket(b) => b.try_acquire(now, cost),
            Limiter::Log(l) => l.try_acquire(now, cost),
        }
    }
}

/// A count as a binding would take it from a host number.
fn count(value: &Value, name: &'static str) -> Result<u64, Error> {
    match value {
        Value::Number(n) => match n.as_u64() {
            Some(v) => Ok(v),
            None => count_from_f64(n.as_f64().unwrap(), name),
        },
        _ => Err(Error::InvalidType {
            name,
            expected: "a number",
        }),
    }
}

/// A duration in nanoseconds, through the same float conversion the bindings use.
fn nanos(value: &Value, name: &'static str) -> Result<Nanos, Error> {
    match value {
        Value::Number(n) => match n.as_u64() {
            Some(v) => Ok(Nanos(v)),
            None => Nanos::from_secs_f64(n.as_f64().unwrap() / 1e9, name),
        },
        _ => Err(Error::InvalidType {
            name,
            expected: "a number",
        }),
    }
}

fn build(algorithm: &str, config: &Map<String, Value>) -> Result<Limiter, Error> {
    match algorithm {
        "token_bucket" => {
            let capacity = count(&config["capacity"], "capacity")?;
            let refill_tokens = count(&config["refill_tokens"], "refill_tokens")?;
            let period = nanos(&config["refill_period_ns"], "refill_period")?;
            let bucket = match config.get("initial_tokens") {
                None => TokenBucket::new(capacity, refill_tokens, period),
                Some(v) => TokenBucket::with_initial_tokens(
                    capacity,
                    refill_tokens,
                    period,
                    count(v, "initial_tokens")?,
                ),
            };
            bucket.map(Limiter::Bucket)
        }
        "sliding_window_log" => SlidingWindowLog::new(
            count(&config["limit"], "limit")?,
            nanos(&config["window_ns"], "window")?,
        )
        .map(Limiter::Log),
        other => panic!("unknown algorithm {other}"),
    }
}

fn error_json(e: &Error) -> Value {
    json!({"code": e.code(), "argument": e.argument().unwrap()})
}

fn decision_json(d: &Decision) -> Value {
    json!({
        "allowed": d.allowed,
        "remaining": d.remaining,
        "limit": d.limit,
        "retry_after_ns": d.retry_after.0,
        "reset_after_ns": d.reset_after.0,
    })
}

fn step(limiter: &mut Limiter, step: &Value) -> Result<Decision, Error> {
    let now = nanos(&step["now_ns"], "now")?;
    let cost = count(&step["cost"], "cost")?;
    limiter.try_acquire(now, cost)
}

fn run_scenario(scenario: &Value) {
    let name = scenario["name"].as_str().unwrap();
    let config = scenario["config"].as_object().unwrap();
    let built = build(scenario["algorithm"].as_str().unwrap(), config);
    let mut limiter = match (built, scenario.get("expect_error")) {
        (Err(e), Some(expected)) => return assert_eq!(&error_json(&e), expected, "{name}"),
        (Ok(_), Some(expected)) => panic!("{name}: built, but expected {expected}"),
        (Err(e), None) => panic!("{name}: failed to build: {e}"),
        (Ok(limiter), None) => limiter,
    };
    for (i, s) in scenario["steps"].as_array().unwrap().iter().enumerate() {
        let got = match step(&mut limiter, s) {
            Ok(d) => json!({"expect": decision_json(&d)}),
            Err(e) => json!({"expect_error": error_json(&e)}),
        };
        let key = if s.get("expect").is_some() {
            "expect"
        } else {
            "expect_error"
        };
        assert_eq!(got.get(key), s.get(key), "{name}, step {i}: {s}");
    }
}

#[test]
fn every_vector_file_runs_and_agrees_with_the_core() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
    let index: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("index.json")).unwrap()).unwrap();
    let listed = index["files"].as_object().unwrap();
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".json") && n != "index.json")
        .collect();
    on_disk.sort();
    let mut names: Vec<String> = listed.keys().cloned().collect();
    names.sort();
    assert_eq!(
        on_disk, names,
        "index.json must list exactly the vector files"
    );

    let mut ran = 0;
    for (file, expected_count) in listed {
        let doc: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(file)).unwrap()).unwrap();
        let scenarios = doc["scenarios"].as_array().unwrap();
        assert_eq!(
            scenarios.len() as u64,
            expected_count.as_u64().unwrap(),
            "{file}"
        );
        for scenario in scenarios {
            run_scenario(scenario);
            ran += 1;
        }
    }
    let total: u64 = listed.values().map(|c| c.as_u64().unwrap()).sum();
    assert!(total > 0);
    assert_eq!(ran, total);
    println!("ran {ran} vector scenarios");
}
