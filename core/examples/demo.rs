//! Replays `demo/trace.json` through the core and prints one JSON line per decision.
//!
//! `cargo run -p ratekeeper --features alloc --example demo -- demo/trace.json`

use ratekeeper::{Decision, Error, Nanos, SlidingWindowLog, TokenBucket};
use serde_json::{json, Value};

fn u(v: &Value) -> u64 {
    v.as_u64().expect("the trace holds non-negative integers")
}

/// One limiter of the trace, as a function from (now, cost) to its decision.
type Acquire = Box<dyn FnMut(Nanos, u64) -> Result<Decision, Error>>;

fn limiter(spec: &Value) -> Result<Acquire, Error> {
    let c = &spec["config"];
    Ok(match spec["algorithm"].as_str() {
        Some("token_bucket") => {
            let mut b = TokenBucket::new(
                u(&c["capacity"]),
                u(&c["refill_tokens"]),
                Nanos(u(&c["refill_period_ns"])),
            )?;
            Box::new(move |now, cost| b.try_acquire(now, cost))
        }
        _ => {
            let mut l = SlidingWindowLog::new(u(&c["limit"]), Nanos(u(&c["window_ns"])))?;
            Box::new(move |now, cost| l.try_acquire(now, cost))
        }
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "demo/trace.json".into());
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    for (i, spec) in trace["limiters"].as_array().unwrap().iter().enumerate() {
        let mut acquire = limiter(spec)?;
        for (j, r) in trace["requests"].as_array().unwrap().iter().enumerate() {
            let d = acquire(Nanos(u(&r["now_ns"])), u(&r["cost"]))?;
            let line = json!({"limiter": i, "request": j, "allowed": d.allowed, "remaining": d.remaining,
                "retry_after_ns": d.retry_after.0, "reset_after_ns": d.reset_after.0});
            println!("{line}");
        }
    }
    Ok(())
}
