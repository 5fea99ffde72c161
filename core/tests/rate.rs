//! Rate strings: the grammar of Python's `limits`, the errors, the canonical
//! form, and properties over generated and arbitrary strings.

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use ratekeeper::{parse_rates, Error, Nanos, Rate};

const S: u64 = 1_000_000_000;
const DAY: u64 = 86_400 * S;
const UNIT: &str = "a unit (second, minute, hour, day, month, year)";

fn rate(amount: u64, secs: u64) -> Rate {
    Rate::new(amount, Nanos::from_secs(secs)).unwrap()
}

fn syntax(at: usize, expected: &'static str) -> Error {
    Error::InvalidSyntax {
        name: "rate",
        at,
        expected,
    }
}

/// Strings `limits` 5.8 reads, with what it reads them as (checked with
/// `limits.parse`).
#[test]
fn reads_what_limits_reads() {
    for (s, amount, secs) in [
        ("10/second", 10, 1),
        ("10/seconds", 10, 1),
        ("100 per minute", 100, 60),
        ("10 per 2 hours", 10, 7_200),
        (" 5 / SECOND ", 5, 1),
        ("1/Day", 1, 86_400),
        ("7 PER 3 Days", 7, 3 * 86_400),
        ("2/month", 2, 30 * 86_400),
        ("2/months", 2, 30 * 86_400),
        ("1/year", 1, 360 * 86_400),
        ("3 per 2 years", 3, 720 * 86_400),
        ("10per second", 10, 1),
        ("10persecond", 10, 1),
        ("10/2seconds", 10, 2),
        ("10 /2 seconds", 10, 2),
        ("010/01 hour", 10, 3_600),
        ("\t10\n/\r\u{b}\u{c}1 minute\n", 10, 60),
        // Python's \s: Unicode spaces and the ASCII separators U+001C..U+001F.
        ("\u{a0}10\u{3000}per\u{2003}hour\u{85}", 10, 3_600),
        ("\u{1c}1\u{1f}/\u{1d}hour\u{1e}", 1, 3_600),
        ("18446744073709551615/second", u64::MAX, 1),
        ("1/213503 days", 1, 213_503 * 86_400),
    ] {
        assert_eq!(Rate::parse(s), Ok(rate(amount, secs)), "{s:?}");
        assert_eq!(s.parse::<Rate>(), Ok(rate(amount, secs)), "{s:?}");
    }
}

#[test]
fn syntax_errors_say_where_and_what() {
    for (s, at, expected) in [
        ("", 0, "a count"),
        ("   ", 3, "a count"),
        ("per second", 0, "a count"),
        ("-1/second", 0, "a count"),
        ("1.5/second", 1, "`/` or `per`"),
        ("10", 2, "`/` or `per`"),
        ("10 pe second", 3, "`/` or `per`"),
        ("10 second", 3, "`/` or `per`"),
        ("10/", 3, UNIT),
        ("10/2", 4, UNIT),
        ("10 per ", 7, UNIT),
        ("10 per fortnight", 7, UNIT),
        ("10/secs", 3, UNIT),
        ("10/secondss", 3, UNIT),
        ("10/ms", 3, UNIT),
        ("10/2 2 seconds", 5, UNIT),
        ("10/per second", 3, UNIT),
        ("10/ſecond", 3, UNIT), // long s: `limits`' [a-z] matches it, its unit check does not
        ("10/second second", 10, "the end of the rate"),
        ("10/second.", 9, "the end of the rate"),
        ("10/hour;100/day", 7, "the end of the rate"),
        ("10/hour:", 7, "the end of the rate"),
        ("１０/second", 0, "a count"), // fullwidth digits are not [0-9]
    ] {
        assert_eq!(Rate::parse(s), Err(syntax(at, expected)), "{s:?}");
    }
    let message = Rate::parse("10 per fortnight").unwrap_err().to_string();
    assert_eq!(
        message,
        "`rate` does not parse: expected a unit (second, minute, hour, day, month, year) at byte 7"
    );
    assert_eq!(Rate::parse("x").unwrap_err().code(), "invalid_syntax");
}

/// Where `limits` reads what is surely a mistake, this parser refuses.
#[test]
fn refuses_what_limits_reads_by_mistake() {
    let zero = Err(Error::ZeroValue { name: "rate" });
    assert_eq!(Rate::parse("0/second"), zero); // limits: a limit of 0
    assert_eq!(Rate::parse("10/0 seconds"), zero); // limits: read as 10/second
    assert_eq!(Rate::parse("10 per 00 hours"), zero);
    // limits: `(:?` for `(?:` in its list pattern lets `:` before a separator.
    let list: Vec<_> = parse_rates("1/second:;2/minute").collect();
    assert_eq!(list, [Err(syntax(8, "`;`, `,`, `|` or the end"))]);
    let overflow = |s: &str| Rate::parse(s).map_err(|e| e.code());
    assert_eq!(overflow("18446744073709551616/second"), Err("overflow"));
    assert_eq!(overflow("1/18446744073709551616 seconds"), Err("overflow"));
    assert_eq!(overflow("1/213504 days"), Err("overflow")); // 2^64 ns is 213,503.98 days
    assert_eq!(overflow("1/594 years"), Err("overflow"));
    // Syntax first: a bad unit is reported even when the count overflows.
    assert_eq!(
        Rate::parse("99999999999999999999/fortnight"),
        Err(syntax(21, UNIT))
    );
    assert_eq!(
        Rate::parse("99999999999999999999/second")
            .unwrap_err()
            .to_string(),
        "`rate` is too large: its count does not fit in 64 bits"
    );
}

#[test]
fn new_refuses_zeros() {
    assert_eq!(
        Rate::new(0, Nanos(1)),
        Err(Error::ZeroValue { name: "amount" })
    );
    assert_eq!(
        Rate::new(1, Nanos::ZERO),
        Err(Error::ZeroValue { name: "period" })
    );
}

#[test]
fn displays_the_canonical_form() {
    for (s, canonical) in [
        ("10/second", "10/second"),
        ("10 per 2 seconds", "10/2 seconds"),
        ("100 PER MINUTE", "100/minute"),
        ("1/60 seconds", "1/minute"),
        ("1/90 seconds", "1/90 seconds"),
        ("1/120 minutes", "1/2 hours"),
        ("5/24 hours", "5/day"),
        ("5/7 days", "5/7 days"),
        ("5/month", "5/30 days"), // limits' fixed month, named as what it is
        ("5/year", "5/360 days"),
        ("5/2 years", "5/720 days"),
        (
            "18446744073709551615/213503 days",
            "18446744073709551615/213503 days",
        ),
    ] {
        let rate = Rate::parse(s).unwrap();
        assert_eq!(rate.to_string(), canonical, "{s:?}");
        assert_eq!(Rate::parse(canonical), Ok(rate));
    }
    // No unit below the second: shown in nanoseconds, which does not parse.
    let odd = Rate::new(3, Nanos(1_500_000_000)).unwrap();
    assert_eq!(odd.to_string(), "3/1500000000 nanoseconds");
    assert!(Rate::parse(&odd.to_string()).is_err());
}

#[test]
fn lists_of_rates() {
    let all = |s| parse_rates(s).collect::<Vec<_>>();
    assert_eq!(
        all("10/hour;100/day"),
        [Ok(rate(10, 3_600)), Ok(rate(100, 86_400))]
    );
    assert_eq!(
        all(" 1/second , 5 per minute | 100/2 hours;1/day "),
        [
            Ok(rate(1, 1)),
            Ok(rate(5, 60)),
            Ok(rate(100, 7_200)),
            Ok(rate(1, 86_400))
        ]
    );
    assert_eq!(all("1/second"), [Ok(rate(1, 1))]);
    assert_eq!(all(""), [Err(syntax(0, "a count"))]);
    assert_eq!(all(";"), [Err(syntax(0, "a count"))]);
    // Offsets count from the start of the list; the iterator ends at the
    // first error.
    assert_eq!(
        all("1/second;"),
        [Ok(rate(1, 1)), Err(syntax(9, "a count"))]
    );
    assert_eq!(
        all("1/second;;2/second"),
        [Ok(rate(1, 1)), Err(syntax(9, "a count"))]
    );
    assert_eq!(
        all("1/second; 2 per fortnight; 3/second"),
        [Ok(rate(1, 1)), Err(syntax(16, UNIT))]
    );
    assert_eq!(
        all("1/second;0/day;3/second"),
        [Ok(rate(1, 1)), Err(Error::ZeroValue { name: "rate" })]
    );
    assert_eq!(
        all("1/second second,2/day"),
        [Err(syntax(9, "`;`, `,`, `|` or the end"))]
    );
    assert_eq!(all("é/second,2/day"), [Err(syntax(0, "a count"))]);
}

/// A well-formed rate written in any of its spellings, with its value.
fn spelled() -> impl Strategy<Value = (String, Rate)> {
    let space = prop::collection::vec(
        prop::sample::select(vec![" ", "  ", "\t", "\n", "\u{a0}", "\u{3000}", "\u{1f}"]),
        0..3,
    )
    .prop_map(|v| v.concat());
    let unit = prop::sample::select(vec![
        ("second", 1u64),
        ("minute", 60),
        ("hour", 3_600),
        ("day", 86_400),
        ("month", 30 * 86_400),
        ("year", 360 * 86_400),
    ]);
    (
        (space.clone(), 1u64..=u64::MAX, space.clone()),
        (any::<bool>(), any::<u8>(), space.clone()),
        (prop::option::of((0usize..3, 1u64..=500)), space.clone()),
        (unit, any::<bool>(), any::<u8>(), space),
    )
        .prop_map(
            |((s1, amount, s2), (slash, case, s3), (n, s4), ((name, secs), plural, ucase, s5))| {
                let recase = |word: &str, bits: u8| -> String {
                    word.chars()
                        .enumerate()
                        .map(|(i, c)| {
                            if bits >> (i % 8) & 1 == 1 {
                                c.to_ascii_uppercase()
                            } else {
                                c
                            }
                        })
                        .collect()
                };
                let sep = if slash {
                    "/".to_string()
                } else {
                    recase("per", case)
                };
                let (zeros, multiple) = n.unwrap_or((0, 1));
                let n_text = match n {
                    Some(_) => format!("{}{multiple}", "0".repeat(zeros)),
                    None => String::new(),
                };
                let word = if plural {
                    format!("{name}s")
                } else {
                    name.to_string()
                };
                let word = recase(&word, ucase);
                let text = format!("{s1}{amount}{s2}{sep}{s3}{n_text}{s4}{word}{s5}");
                let period = Nanos(multiple * secs * S);
                (text, Rate::new(amount, period).unwrap())
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/rate.txt"))),
        ..ProptestConfig::default()
    })]

    /// Every spelling of a rate reads as its value, alone and in a list,
    /// and its canonical form reads back the same.
    #[test]
    fn every_spelling_reads_as_its_value(
        rates in prop::collection::vec(spelled(), 1..5),
        separators in prop::collection::vec(prop::sample::select(vec![";", ",", "|"]), 4),
    ) {
        let (text, value) = &rates[0];
        prop_assert_eq!(Rate::parse(text), Ok(*value), "{:?}", text);
        prop_assert_eq!(Rate::parse(&value.to_string()), Ok(*value));
        let mut list = String::new();
        for (i, (text, _)) in rates.iter().enumerate() {
            if i > 0 {
                list += separators[i - 1];
            }
            list += text;
        }
        let parsed: Vec<_> = parse_rates(&list).collect();
        let expected: Vec<_> = rates.iter().map(|(_, r)| Ok(*r)).collect();
        prop_assert_eq!(parsed, expected, "{:?}", list);
    }

    /// No string panics; whatever parses displays as a string that parses
    /// back to the same rate; an error's offset is a char boundary within
    /// the string.
    #[test]
    fn arbitrary_strings_never_panic(s in any::<String>()) {
        check(&s)?;
    }

    /// The same over arbitrary bytes read as (lossy) UTF-8.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        check(&String::from_utf8_lossy(&bytes))?;
    }

    /// The same over strings made mostly of the grammar's own pieces, which
    /// parse far more often than arbitrary ones.
    #[test]
    fn near_misses_never_panic(
        pieces in prop::collection::vec(prop::sample::select(vec![
            "0", "1", "9", "18446744073709551616", "/", "per", "PeR", " ", "\u{a0}", "s",
            "second", "minute", "hours", "DAY", "month", "years", ";", ",", "|", ":", "é", "ſ", "x",
        ]), 0..12),
    ) {
        check(&pieces.concat())?;
    }
}

fn check(s: &str) -> Result<(), TestCaseError> {
    match Rate::parse(s) {
        Ok(rate) => {
            prop_assert!(rate.amount() > 0 && rate.period().0 % S == 0 && rate.period().0 > 0);
            prop_assert_eq!(Rate::parse(&rate.to_string()), Ok(rate), "{:?}", s);
        }
        Err(Error::InvalidSyntax { at, .. }) => {
            prop_assert!(s.is_char_boundary(at), "{} in {:?}", at, s)
        }
        Err(e) => prop_assert!(matches!(e.code(), "zero_value" | "overflow"), "{}", e),
    }
    for item in parse_rates(s) {
        match item {
            Ok(rate) => prop_assert_eq!(Rate::parse(&rate.to_string()), Ok(rate)),
            Err(Error::InvalidSyntax { at, .. }) => prop_assert!(s.is_char_boundary(at)),
            Err(e) => prop_assert!(matches!(e.code(), "zero_value" | "overflow"), "{}", e),
        }
    }
    Ok(())
}

#[test]
fn the_longest_period() {
    // 213,503 days is the most whole days below 2^64 ns.
    let rate = Rate::parse("1/213503 days").unwrap();
    assert_eq!(rate.period(), Nanos(213_503 * DAY));
    assert!(213_504u128 * DAY as u128 > u64::MAX as u128);
}
