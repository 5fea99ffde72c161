//! Replays `demo/trace.json` through the core and prints one JSON line per decision.
//!
//! `cargo run -p ratekeeper --features alloc --example demo -- demo/trace.json`

use ratekeeper::{Error, Limiter, Nanos, SlidingWindowLog, TokenBucket};
use serde_json::{json, Value};

fn u(v: &Value) -> u64 {
    v.as_u64().expect("the trace holds non-negative integers")
}

fn limiter(spec: &Value) -> Result<Box<dyn Limiter>, Error> {
    let c = &spec["config"];
    Ok(match spec["algorithm"].as_str() {
        Some("token_bucket") => Box::new(TokenBucket::new(
            u(&c["capacity"]),
            u(&c["refill_tokens"]),
            Nanos(u(&c["refill_period_ns"])),
        )?),
        _ => Box::new(SlidingWindowLog::new(
            u(&c["limit"]),
            Nanos(u(&c["window_ns"])),
        )?),
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "demo/trace.json".into());
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    for (i, spec) in trace["limiters"].as_array().unwrap().iter().enumerate() {
        let mut limiter = limiter(spec)?;
        for (j, r) in trace["requests"].as_array().unwrap().iter().enumerate() {
            let d = limiter.try_acquire(Nanos(u(&r["now_ns"])), u(&r["cost"]))?;
            let line = json!({"limiter": i, "request": j, "allowed": d.allowed, "remaining": d.remaining,
                "retry_after_ns": d.retry_after.0, "reset_after_ns": d.reset_after.0});
            println!("{line}");
        }
    }
    Ok(())
}
