//! Exports the module's stack pointer (a wasm global, `__stack_pointer`),
//! which the JS glue puts back after a trap: see `traps.js`.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_FAMILY").as_deref() == Ok("wasm") {
        println!("cargo:rustc-link-arg-cdylib=--export=__stack_pointer");
    }
}
