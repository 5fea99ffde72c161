//! The repository's README (`README.md`, beside this folder): its Rust
//! examples are this crate's doctests, run by `scripts/rust.sh`.
//!
//! They live here rather than in the core crate, whose own README is tested
//! there: a doctest reading a file outside the core's folder would not
//! build from its package on crates.io, which holds no such file.
#![doc = include_str!("../../README.md")]

#[cfg(test)]
mod tests {
    /// The core README's ```toml block: the dependency line a user copies
    /// asks for this version, and for features the crate has.
    #[test]
    fn the_core_readmes_dependency_line_names_this_version_and_real_features() {
        let readme = include_str!("../../core/README.md");
        let manifest = include_str!("../../core/Cargo.toml");
        let block = readme
            .split("```toml\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next());
        let line = block.and_then(|b| b.lines().find(|l| l.starts_with("ratekeeper = ")));
        let line = line.expect("core/README.md has a ```toml block naming ratekeeper");

        let asked = line
            .split("version = \"")
            .nth(1)
            .and_then(|rest| rest.split('"').next());
        let asked = asked.expect("a version");
        // A caret requirement: "0.1" matches 0.1.x, the version built here.
        let version = env!("CARGO_PKG_VERSION");
        assert!(
            version.starts_with(&format!("{asked}.")),
            "README asks for {asked}, the crate is {version}"
        );

        let features = line
            .split("features = [")
            .nth(1)
            .and_then(|rest| rest.split(']').next());
        let features: Vec<&str> = features
            .expect("features")
            .split(',')
            .map(|f| f.trim().trim_matches('"'))
            .collect();
        let declared = manifest
            .split("[features]")
            .nth(1)
            .expect("core/Cargo.toml has [features]");
        for feature in features {
            assert!(
                declared.contains(&format!("\n{feature} = [")),
                "no feature {feature:?} in core/Cargo.toml"
            );
        }
    }

    /// The core README's Rust examples read as they are tested: crates.io
    /// and the repository's host show a rustdoc hidden line (`# ...`) as
    /// written, which is no Rust a user could copy (the `?` of a hidden
    /// `Ok::<(), _>(())` needs a `main` returning a `Result`: write it out).
    #[test]
    fn the_core_readmes_rust_examples_hide_no_lines() {
        let readme = include_str!("../../core/README.md");
        let blocks: Vec<&str> = readme
            .split("```rust\n")
            .skip(1)
            .filter_map(|rest| rest.split("\n```").next())
            .collect();
        assert!(!blocks.is_empty(), "core/README.md has a ```rust block");
        for block in blocks {
            for line in block.lines() {
                let code = line.trim_start();
                assert!(
                    code != "#" && !code.starts_with("# "),
                    "core/README.md shows a hidden line as written: {line:?}"
                );
            }
        }
    }

    /// A keyed store takes a lookup type made equivalent to its keys with
    /// the `equivalent` crate's trait (as indexmap takes it), in a build
    /// that has the core as a user's does. Tested here, not in the core's
    /// own tests: their dev-dependencies turn hashbrown's `equivalent`
    /// feature on (through governor), which makes hashbrown's `Equivalent`
    /// that same trait; without the feature it is a trait of hashbrown's
    /// own, which the core re-exported until it took `equivalent`'s.
    #[test]
    fn a_keyed_store_takes_the_equivalent_crates_trait() {
        use core::hash::{Hash, Hasher};
        use ratekeeper::{Gcra, KeyedLimiter, Nanos};

        /// A borrowed `(String, u32)` key, hashed as the tuple is.
        struct Ref<'a>(&'a str, u32);

        impl Hash for Ref<'_> {
            fn hash<H: Hasher>(&self, state: &mut H) {
                self.0.hash(state);
                self.1.hash(state);
            }
        }

        impl equivalent::Equivalent<(String, u32)> for Ref<'_> {
            fn equivalent(&self, key: &(String, u32)) -> bool {
                self.0 == key.0 && self.1 == key.1
            }
        }

        let mut store = KeyedLimiter::new(Gcra::new(1, Nanos(10)).unwrap());
        let held = |store: &KeyedLimiter<(String, u32), Gcra>, key: &Ref<'_>| {
            !store.peek(key, Nanos::ZERO, 1).unwrap().allowed
        };
        assert!(!held(&store, &Ref("alice", 7)));
        let key = ("alice".to_owned(), 7);
        assert!(store.try_acquire(&key, Nanos::ZERO, 1).unwrap().allowed);
        assert!(held(&store, &Ref("alice", 7)));
        assert!(!held(&store, &Ref("alice", 8)));
        assert!(store.reset(&Ref("alice", 7)));
        assert!(store.is_empty());
    }
}
