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
}
