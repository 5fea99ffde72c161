//! Runs the shared conformance vectors in `tests/vectors/` (and
//! `tests/vectors/core-only/`) against the core.

use std::path::{Path, PathBuf};

use ratekeeper::{
    count_from_f64, AnyKeyed, AnyLimiter, Bandwidth, Calendar, Decision, Error, FixedWindow, Gcra,
    LeakyBucket, Limiter, Nanos, Policy, Portable, SlidingWindowCounter, SlidingWindowLog,
};
use serde_json::{json, Map, Value};

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

fn bandwidth(c: &Map<String, Value>) -> Result<Bandwidth, Error> {
    let capacity = count(&c["capacity"], "capacity")?;
    let refill_tokens = count(&c["refill_tokens"], "refill_tokens")?;
    let period = nanos(&c["refill_period_ns"], "refill_period")?;
    let rule = match c.get("refill").and_then(Value::as_str) {
        Some("interval") => Bandwidth::interval(capacity, refill_tokens, period)?,
        _ => Bandwidth::greedy(capacity, refill_tokens, period)?,
    };
    match c.get("initial_tokens") {
        Some(v) => rule.with_initial_tokens(count(v, "initial_tokens")?),
        None => Ok(rule),
    }
}

/// A window algorithm of `limit` per `window_ns`, or per `calendar` period
/// (`day`, `week` or `month`).
fn window<L>(
    c: &Map<String, Value>,
    new: fn(u64, Nanos) -> Result<L, Error>,
    with_calendar: fn(u64, Calendar) -> Result<L, Error>,
) -> Result<L, Error> {
    // As the bindings read it: a name of another type is a type error, an
    // unknown name a bad value.
    let calendar = match c.get("calendar") {
        None => None,
        Some(Value::String(name)) => {
            Some(Calendar::from_name(name).ok_or(Error::InvalidValue {
                name: "calendar",
                reason: "must be day, week or month",
            })?)
        }
        Some(_) => {
            return Err(Error::InvalidType {
                name: "calendar",
                expected: "a string",
            })
        }
    };
    let limit = count(&c["limit"], "limit")?;
    match calendar {
        Some(calendar) => with_calendar(limit, calendar),
        None => new(limit, nanos(&c["window_ns"], "window")?),
    }
}

fn build(algorithm: &str, config: &Map<String, Value>) -> Result<AnyLimiter, Error> {
    match algorithm {
        "token_bucket" => {
            let rules = match config.get("bandwidths") {
                Some(list) => list
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|b| bandwidth(b.as_object().unwrap()))
                    .collect(),
                None => bandwidth(config).map(|rule| vec![rule]),
            }?;
            AnyLimiter::token_bucket(&rules)
        }
        "gcra" => Ok(AnyLimiter::from(match config.get("emission_interval_ns") {
            Some(interval) => Gcra::new(
                count(&config["burst"], "burst")?,
                nanos(interval, "emission_interval")?,
            )?,
            None => Gcra::per_period(
                count(&config["burst"], "burst")?,
                count(&config["tokens"], "tokens")?,
                nanos(&config["period_ns"], "period")?,
            )?,
        })),
        "leaky_bucket" => Ok(AnyLimiter::from(LeakyBucket::new(
            count(&config["capacity"], "capacity")?,
            nanos(&config["interval_ns"], "interval")?,
        )?)),
        "sliding_window_log" => Ok(AnyLimiter::from(SlidingWindowLog::new(
            count(&config["limit"], "limit")?,
            nanos(&config["window_ns"], "window")?,
        )?)),
        "sliding_window_counter" => Ok(AnyLimiter::from(window(
            config,
            SlidingWindowCounter::new,
            SlidingWindowCounter::with_calendar,
        )?)),
        "fixed_window" => Ok(AnyLimiter::from(window(
            config,
            FixedWindow::new,
            FixedWindow::with_calendar,
        )?)),
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

/// Applies one step and returns what it should be compared with.
fn step(limiter: &mut dyn Limiter, s: &Value) -> Result<Value, Error> {
    let now = nanos(&s["now_ns"], "now")?;
    let cost = count(&s["cost"], "cost")?;
    Ok(
        match s.get("op").and_then(Value::as_str).unwrap_or("acquire") {
            "acquire" => decision_json(&limiter.try_acquire(now, cost)?),
            "peek" => decision_json(&limiter.peek(now, cost)?),
            "reserve" => match limiter.reserve(now, cost, nanos(&s["max_wait_ns"], "max_wait")?)? {
                Ok(wait) => json!({"wait_ns": wait.0}),
                Err(denied) => json!({"denied": decision_json(&denied)}),
            },
            "refund" => {
                limiter.refund(now, cost);
                json!({})
            }
            other => panic!("unknown op {other}"),
        },
    )
}

/// A policy built from `{"limits": [{"name", "by", "algorithm", "config"}]}`.
fn build_policy(config: &Map<String, Value>) -> Result<Policy, Error> {
    let mut policy = Policy::new();
    for limit in config["limits"].as_array().unwrap() {
        let by: Vec<&str> = limit["by"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        let limiter = build(
            limit["algorithm"].as_str().unwrap(),
            limit["config"].as_object().unwrap(),
        )?;
        policy.add(limit["name"].as_str().unwrap(), &by, limiter)?;
    }
    Ok(policy)
}

fn policy_step(policy: &mut Policy, s: &Value) -> Result<Value, Error> {
    let (now, cost) = (nanos(&s["now_ns"], "now")?, count(&s["cost"], "cost")?);
    let fields: Vec<(&str, &[u8])> = s["request"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str().unwrap().as_bytes()))
        .collect();
    let answer = match s["op"].as_str().unwrap() {
        "acquire" => policy.try_acquire(&fields, now, cost)?,
        "peek" => policy.peek(&fields, now, cost)?,
        other => panic!("unknown policy op {other}"),
    };
    let mut out = decision_json(&answer.decision);
    out["denied_by"] = json!(answer.denied_by.map(|i| policy.name(i)));
    out["limits"] = policy.decisions().iter().map(decision_json).collect();
    Ok(out)
}

fn keyed_step(store: &mut AnyKeyed, s: &Value) -> Result<Value, Error> {
    let key = s["key"].as_str().unwrap().as_bytes();
    let (now, cost) = (nanos(&s["now_ns"], "now")?, count(&s["cost"], "cost")?);
    Ok(match s["op"].as_str().unwrap() {
        "acquire" => decision_json(&store.try_acquire(key, now, cost)?),
        "peek" => decision_json(&store.peek(key, now, cost)?),
        "reserve" => match store.reserve(key, now, cost, nanos(&s["max_wait_ns"], "max_wait")?)? {
            Ok(wait) => json!({"wait_ns": wait.0}),
            Err(denied) => json!({"denied": decision_json(&denied)}),
        },
        "refund" => {
            store.refund(key, now, cost);
            json!({})
        }
        other => panic!("unknown op {other}"),
    })
}

/// Builds a scenario's subject and runs its steps through `step`; returns
/// the subject after them (`None` when building was expected to fail).
fn run_steps<T>(
    scenario: &Value,
    built: Result<T, Error>,
    step: impl Fn(&mut T, &Value) -> Result<Value, Error>,
) -> Option<T> {
    let name = scenario["name"].as_str().unwrap();
    let mut subject = match (built, scenario.get("expect_error")) {
        (Err(e), Some(expected)) => {
            assert_eq!(&error_json(&e), expected, "{name}");
            return None;
        }
        (Ok(_), Some(expected)) => panic!("{name}: built, but expected {expected}"),
        (Err(e), None) => panic!("{name}: failed to build: {e}"),
        (Ok(subject), None) => subject,
    };
    for (i, s) in scenario["steps"].as_array().unwrap().iter().enumerate() {
        let got = match step(&mut subject, s) {
            Ok(v) => json!({"expect": v}),
            Err(e) => json!({"expect_error": error_json(&e)}),
        };
        let key = if s.get("expect").is_some() {
            "expect"
        } else {
            "expect_error"
        };
        assert_eq!(got.get(key), s.get(key), "{name}, step {i}: {s}");
    }
    Some(subject)
}

fn run_scenario(scenario: &Value) {
    let config = scenario["config"].as_object().unwrap();
    match scenario["algorithm"].as_str().unwrap() {
        "policy" => drop(run_steps(scenario, build_policy(config), policy_step)),
        "keyed" => {
            let prototype = build(
                config["algorithm"].as_str().unwrap(),
                config["config"].as_object().unwrap(),
            );
            drop(run_steps(
                scenario,
                prototype.map(AnyKeyed::new),
                keyed_step,
            ));
        }
        algorithm => {
            let limiter = run_steps(
                scenario,
                build(algorithm, config),
                |l: &mut AnyLimiter, s| step(l, s),
            );
            if let (Some(limiter), Some(expected)) = (limiter, scenario.get("state")) {
                check_state(
                    scenario,
                    &limiter,
                    expected.as_str().unwrap(),
                    algorithm,
                    config,
                );
            }
        }
    }
}

/// The state after the steps is exactly the expected bytes; they restore
/// into a fresh limiter, and each broken variant is refused with its code.
fn check_state(
    scenario: &Value,
    limiter: &AnyLimiter,
    expected: &str,
    algorithm: &str,
    config: &Map<String, Value>,
) {
    let name = scenario["name"].as_str().unwrap();
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let unhex = |s: &str| {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect::<Vec<u8>>()
    };
    assert_eq!(hex(&limiter.to_bytes()), expected, "{name}: state");
    let mut fresh = build(algorithm, config).unwrap();
    fresh.restore(&unhex(expected)).unwrap();
    assert_eq!(&fresh, limiter, "{name}: restored");
    for case in scenario["restore"].as_array().unwrap() {
        let err = fresh
            .clone()
            .restore(&unhex(case["bytes"].as_str().unwrap()))
            .unwrap_err();
        assert_eq!(
            err.code(),
            case["expect_error"].as_str().unwrap(),
            "{name}: {case}"
        );
    }
}

/// Runs every file of one folder, checking it against the folder's index.json;
/// returns the number of scenarios run.
fn run_folder(dir: &Path) -> u64 {
    let read = |p: PathBuf| -> Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    let index = read(dir.join("index.json"));
    let listed = index["files"].as_object().unwrap();
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".json") && n != "index.json")
        .collect();
    on_disk.sort();
    let mut names: Vec<String> = listed.keys().cloned().collect();
    names.sort();
    assert_eq!(
        on_disk, names,
        "{dir:?}/index.json must list exactly the vector files"
    );

    let mut ran = 0;
    for (file, expected_count) in listed {
        let scenarios = read(dir.join(file))["scenarios"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(
            scenarios.len() as u64,
            expected_count.as_u64().unwrap(),
            "{file}"
        );
        for scenario in &scenarios {
            run_scenario(scenario);
            ran += 1;
        }
    }
    let total: u64 = listed.values().map(|c| c.as_u64().unwrap()).sum();
    assert!(total > 0);
    assert_eq!(ran, total);
    ran
}

#[test]
fn every_vector_file_runs_and_agrees_with_the_core() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
    let ran = run_folder(&dir) + run_folder(&dir.join("core-only"));
    println!("ran {ran} vector scenarios");
}
