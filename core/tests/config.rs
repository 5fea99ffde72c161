//! Declarative configuration: JSON in, the same policy as built by hand out.

use ratekeeper::{
    AnyLimiter, Calendar, FixedWindow, Gcra, Headers, LimitConfig, Limiter, Nanos, Policy,
    PolicyConfig, TokenBucket,
};

fn parse(json: &str) -> PolicyConfig {
    serde_json::from_str(json).unwrap()
}

#[test]
fn a_json_policy_decides_like_the_one_built_by_hand() {
    let config = parse(
        r#"{"limits": [
            {"name": "api-per-second", "algorithm": "token_bucket", "rate": "10/second", "burst": 20, "by": ["user"]},
            {"name": "per-user-gcra", "algorithm": "gcra", "rate": "5 per 500 milliseconds"},
            {"name": "daily", "algorithm": "fixed_window", "rate": "1000/day", "calendar": "day", "by": ["user"], "max_keys": 10000}
        ]}"#,
    );
    let from_json = config.policy();
    // "500 milliseconds" is not a limits unit: the whole policy is refused,
    // naming the rate.
    assert_eq!(from_json.unwrap_err().code(), "invalid_syntax");

    let config = parse(
        r#"{"limits": [
            {"name": "api-per-second", "algorithm": "token_bucket", "rate": "10/second", "burst": 20, "by": ["user"]},
            {"name": "global", "algorithm": "gcra", "rate": "100/second"},
            {"name": "daily", "algorithm": "fixed_window", "rate": "1000/day", "calendar": "day", "by": ["user"], "max_keys": 10000}
        ]}"#,
    );
    let mut from_json = config.policy().unwrap();
    let mut by_hand = Policy::new();
    let bucket = ratekeeper::Bandwidth::greedy(20, 10, Nanos::from_secs(1)).unwrap();
    by_hand
        .add(
            "api-per-second",
            &["user"],
            TokenBucket::from_bandwidths([bucket]).unwrap().into(),
        )
        .unwrap();
    by_hand
        .add(
            "global",
            &[],
            Gcra::new(100, Nanos::from_millis(10)).unwrap().into(),
        )
        .unwrap();
    by_hand
        .add(
            "daily",
            &["user"],
            FixedWindow::with_calendar(1000, Calendar::Day)
                .unwrap()
                .into(),
        )
        .unwrap();
    let mut now = 1_700_000_000_000_000_000u64;
    for i in 0..2_000u64 {
        now += 3_000_000 * (i % 7);
        let user = [("user", &[b'a' + (i % 3) as u8][..])];
        let cost = i % 4;
        assert_eq!(
            from_json.try_acquire(&user, Nanos(now), cost),
            by_hand.try_acquire(&user, Nanos(now), cost),
            "request {i}"
        );
    }
}

#[test]
fn several_rates_make_a_bucket_of_several_bandwidths() {
    let config = parse(r#"{"limits": [{"name": "both", "rate": "2/second;3/minute"}]}"#);
    let limiter = config.limits[0].limiter().unwrap();
    assert!(matches!(limiter, AnyLimiter::TokenBucket2(_)));
    assert_eq!(limiter.limit(), 2);
}

#[test]
fn bad_configurations_name_their_argument() {
    let code = |json: &str| {
        let err = parse(json).policy().unwrap_err();
        (err.code(), err.argument())
    };
    assert_eq!(
        code(r#"{"limits": [{"name": "a", "algorithm": "gcra", "rate": "7/second"}]}"#),
        ("invalid_value", Some("rate"))
    );
    // The fields of the configuration, not the constructors' arguments
    // (`capacity`, `refill_period`), which it does not have.
    for algorithm in ["token_bucket", "gcra", "leaky_bucket"] {
        let limit = |burst: u64| {
            format!(
                r#"{{"limits": [{{"name": "a", "algorithm": "{algorithm}", "rate": "1/hour", "burst": {burst}}}]}}"#
            )
        };
        assert_eq!(
            code(&limit(0)),
            ("zero_value", Some("burst")),
            "{algorithm}"
        );
        assert_eq!(
            code(&limit(1 << 40)),
            ("overflow", Some("burst")),
            "{algorithm}"
        );
    }
    assert_eq!(
        code(
            r#"{"limits": [{"name": "a", "algorithm": "sliding_window_log", "rate": "2000000/hour"}]}"#
        ),
        ("too_large", Some("rate"))
    );
    assert_eq!(
        code(r#"{"limits": [{"name": "a", "algorithm": "gcra", "rate": "1/second;2/minute"}]}"#),
        ("invalid_value", Some("rate"))
    );
    assert_eq!(
        code(
            r#"{"limits": [{"name": "a", "algorithm": "gcra", "rate": "1/second", "calendar": "day"}]}"#
        ),
        ("invalid_value", Some("calendar"))
    );
    // A calendar's windows take a rate of its own period: 10/second would
    // read as 10 a day.
    for (rate, calendar) in [
        ("10/second", "day"),
        ("10/day", "week"),
        ("10/30 days", "day"),
    ] {
        for algorithm in ["fixed_window", "sliding_window_counter"] {
            assert_eq!(
                code(&format!(
                    r#"{{"limits": [{{"name": "a", "algorithm": "{algorithm}", "rate": "{rate}", "calendar": "{calendar}"}}]}}"#
                )),
                ("invalid_value", Some("rate")),
                "{rate} {calendar}"
            );
        }
    }
    for (rate, calendar) in [
        ("10/day", "day"),
        ("10 per 7 days", "week"),
        ("10/month", "month"),
    ] {
        let config = format!(
            r#"{{"limits": [{{"name": "a", "algorithm": "fixed_window", "rate": "{rate}", "calendar": "{calendar}"}}]}}"#
        );
        assert!(parse(&config).policy().is_ok(), "{rate} {calendar}");
    }
    assert_eq!(
        code(
            r#"{"limits": [{"name": "a", "rate": "1/second"}, {"name": "a", "rate": "2/second"}]}"#
        ),
        ("invalid_value", Some("name"))
    );
    assert_eq!(
        code(r#"{"limits": [{"name": "a", "rate": "0/second"}]}"#),
        ("zero_value", Some("rate"))
    );
    // A store without a bound never refuses a key: the choice would go
    // unheard. The default, nearest_fresh, may be named without one.
    let limit = |bound: &str, eviction: &str| {
        format!(
            r#"{{"limits": [{{"name": "a", "rate": "1/second", "by": ["ip"]{bound}, "eviction": "{eviction}"}}]}}"#
        )
    };
    assert_eq!(
        code(&limit("", "refuse")),
        ("invalid_value", Some("eviction"))
    );
    assert!(parse(&limit("", "nearest_fresh")).policy().is_ok());
    assert!(parse(&limit(r#", "max_keys": 5"#, "refuse"))
        .policy()
        .is_ok());
    // Unknown fields and algorithms are serde's errors, naming the field.
    let err = serde_json::from_str::<PolicyConfig>(
        r#"{"limits": [{"name": "a", "rate": "1/s", "burts": 2}]}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("burts"), "{err}");
    let err = serde_json::from_str::<PolicyConfig>(
        r#"{"limits": [{"name": "a", "rate": "1/s", "algorithm": "magic"}]}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("magic"), "{err}");
}

/// Each of `all` is read back from its name by `from_name` and by serde.
fn names_read_back<T>(all: &[T], name: fn(T) -> &'static str, from_name: fn(&str) -> Option<T>)
where
    T: Copy + PartialEq + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
{
    for &value in all {
        let name = name(value);
        assert_eq!(from_name(name), Some(value));
        assert_eq!(
            serde_json::from_str::<T>(&format!("\"{name}\"")).unwrap(),
            value
        );
        assert_eq!(
            serde_json::to_string(&value).unwrap(),
            format!("\"{name}\"")
        );
    }
}

/// A configuration written out (to log the one in force, or to generate
/// one) reads back as itself, and says only what differs from the defaults,
/// as one written by hand does.
#[test]
fn a_configuration_written_out_reads_back_as_itself() {
    let json = r#"{"limits":[{"name":"api-per-second","algorithm":"token_bucket","rate":"10/second","burst":20,"by":["user"]},{"name":"global","algorithm":"gcra","rate":"100/second"},{"name":"daily","algorithm":"fixed_window","rate":"1000/day","calendar":"day","by":["user","endpoint"],"max_keys":10000,"eviction":"refuse"}]}"#;
    let config = parse(json);
    let written = serde_json::to_string(&config).unwrap();
    assert_eq!(written, json);
    assert_eq!(parse(&written), config);
    assert!(config.policy().is_ok());
}

/// The names `from_name` reads (what the JS bindings read a configuration
/// with) are the ones serde reads (what Rust and Python read it with), and
/// what a limiter reports as its algorithm.
#[test]
fn names_agree_with_serde_and_with_the_limiters() {
    use ratekeeper::{Algorithm, Eviction, LimitConfig};

    names_read_back(Algorithm::ALL, Algorithm::name, Algorithm::from_name);
    names_read_back(Eviction::ALL, Eviction::name, Eviction::from_name);
    names_read_back(Calendar::ALL, Calendar::name, Calendar::from_name);
    for &algorithm in Algorithm::ALL {
        let mut limit = LimitConfig::new("", "1/second");
        limit.algorithm = algorithm;
        assert_eq!(limit.limiter().unwrap().algorithm(), algorithm.name());
    }
    assert_eq!(Algorithm::from_name("Gcra"), None);
    assert_eq!(Eviction::from_name(""), None);
}

/// A burst is a bucket's: beside a window algorithm it is refused, as a
/// calendar beside a bucket is, rather than ignored.
#[test]
fn a_burst_beside_a_window_algorithm_is_refused() {
    use ratekeeper::{Algorithm, LimitConfig};

    for &algorithm in Algorithm::ALL {
        let mut limit = LimitConfig::new("", "100/minute");
        limit.algorithm = algorithm;
        limit.burst = Some(10);
        let bucket = matches!(
            algorithm,
            Algorithm::TokenBucket | Algorithm::Gcra | Algorithm::LeakyBucket
        );
        match limit.limiter() {
            Ok(limiter) => assert!(bucket && limiter.limit() == 10, "{algorithm:?}"),
            Err(err) => {
                assert!(!bucket, "{algorithm:?}: {err}");
                assert_eq!(
                    (err.code(), err.argument()),
                    ("invalid_value", Some("burst"))
                );
            }
        }
    }
}

/// A limit's name tells it in denials and headers, and its fields key it:
/// an empty name, or a field named twice (a typo for another), is refused.
#[test]
fn an_empty_name_or_a_field_named_twice_is_refused() {
    let limiter = || AnyLimiter::from(Gcra::new(1, Nanos(10)).unwrap());
    let mut policy = Policy::new();
    let empty = policy.add("", &[], limiter()).unwrap_err();
    assert_eq!(
        (empty.code(), empty.argument()),
        ("invalid_value", Some("name"))
    );
    let twice = policy.add("a", &["user", "user"], limiter()).unwrap_err();
    assert_eq!(
        (twice.code(), twice.argument()),
        ("invalid_value", Some("by"))
    );
    assert!(policy.is_empty());
    policy.add("a", &["user", "route"], limiter()).unwrap();
}

/// A limit's name is what the headers carry, a structured-field string:
/// printable ASCII, as a limiter's name must be. Another went out with `?`
/// in place of each other character ("caf?-api"), naming no limit.
#[test]
fn a_name_the_headers_cannot_carry_is_refused_in_code_and_in_a_configuration() {
    let limiter = || AnyLimiter::from(Gcra::new(1, Nanos(10)).unwrap());
    for bad in [
        "caf\u{e9}-api",
        "a\r\nRetry-After: 0",
        "tab\there",
        "\u{7f}",
    ] {
        let mut policy = Policy::new();
        let refused = policy.add(bad, &[], limiter()).unwrap_err();
        assert_eq!(refused, Headers::check_name(bad).unwrap_err(), "{bad:?}");
        assert_eq!(
            (refused.code(), refused.argument()),
            ("invalid_value", Some("name"))
        );
        assert!(policy.is_empty());
        let config = PolicyConfig::new(vec![LimitConfig::new(bad, "1/second")]);
        assert_eq!(config.policy_or_fault().unwrap_err(), (0, refused));
    }
    let mut policy = Policy::new();
    policy.add(r#" say "hi" \ ~"#, &[], limiter()).unwrap();
}

/// `LimitConfig::FIELDS`, which the bindings' readers accept (and count, at
/// compile time, against the fields they read), is every field serde writes,
/// in the struct's order: a field added to the struct fails this test until
/// it is listed there too.
#[test]
fn the_listed_fields_are_the_structs() {
    use ratekeeper::{Algorithm, Eviction};

    let mut limit = LimitConfig::new("a", "1/day");
    limit.algorithm = Algorithm::FixedWindow;
    limit.calendar = Some(Calendar::Day);
    limit.burst = Some(1);
    limit.by = vec!["user".into()];
    limit.max_keys = Some(1);
    limit.eviction = Some(Eviction::Refuse);
    let written = serde_json::to_value(&limit).unwrap();
    let mut written: Vec<&str> = written
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut listed = LimitConfig::FIELDS.to_vec();
    written.sort_unstable();
    listed.sort_unstable();
    assert_eq!(written, listed);
    // In the struct's order: serde reads and writes fields in that order.
    let json = serde_json::to_string(&limit).unwrap();
    let at = |field: &str| json.find(&format!("\"{field}\":")).unwrap();
    assert!(
        LimitConfig::FIELDS.windows(2).all(|w| at(w[0]) < at(w[1])),
        "{json}"
    );
}
