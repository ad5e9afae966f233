//! Test harness shared by the integration tests: one body, two devices.
#![allow(
    dead_code,
    reason = "each test binary uses a different part of the harness"
)]

use std::sync::OnceLock;

use tradesim::{Backend, DeviceRequest};

/// Whether `REQUIRE_GPU=1` turns a skipped GPU test into a failure.
pub fn gpu_required() -> bool {
    std::env::var("REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// The CUDA backend, shared by the tests of one binary; `None` (test skipped) when there is no usable GPU,
/// a panic when `REQUIRE_GPU=1`.
pub fn gpu_backend() -> Option<Backend> {
    static GPU: OnceLock<Result<Backend, String>> = OnceLock::new();
    match GPU
        .get_or_init(|| tradesim::select_backend(DeviceRequest::Cuda).map_err(|e| e.to_string()))
    {
        Ok(backend) => Some(backend.clone()),
        Err(reason) if gpu_required() => {
            panic!("REQUIRE_GPU=1 but the CUDA backend is unusable: {reason}")
        }
        Err(reason) => {
            eprintln!("no GPU, skipping: {reason}");
            None
        }
    }
}

/// Turns `fn case(backend: &Backend)` into the tests `case::cpu` and `case::gpu`.
#[macro_export]
macro_rules! test_device {
    ($case:ident) => {
        mod $case {
            #[test]
            fn cpu() {
                super::$case(&tradesim::Backend::Cpu);
            }

            #[test]
            fn gpu() {
                if let Some(backend) = $crate::common::gpu_backend() {
                    super::$case(&backend);
                }
            }
        }
    };
}

/// `|a - b| <= tol x max(1, |b|)`, with a message naming the quantity.
#[track_caller]
pub fn assert_close(what: &str, got: f64, want: f64) {
    let tol = 1e-9 * want.abs().max(1.0);
    assert!((got - want).abs() <= tol, "{what}: got {got}, want {want}");
}
