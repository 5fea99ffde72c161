//! Sets pyo3's configuration flags for this crate, so that code can depend
//! on the interpreter it is built for (`Py_GIL_DISABLED`: a free-threaded
//! CPython; see `src/recycle.rs`).

fn main() {
    pyo3_build_config::use_pyo3_cfgs();
}
