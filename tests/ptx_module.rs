//! The PTX built at `cargo build`: every kernel the host launches is an entry, nothing is external, and
//! float arithmetic is not contracted into FMA (which would break CPU == GPU bit equality).
#![cfg(feature = "cuda")]

use gpu_kernels::kernel_names;

#[test]
fn every_expected_kernel_is_an_entry() {
    for name in kernel_names::ALL {
        let entry = format!(".visible .entry {name}(");
        assert!(tradesim::ptx::PTX.contains(&entry), "PTX lacks `{entry}`");
        assert!(tradesim::ptx::ENTRIES.contains(name), "generated ENTRIES lacks {name}");
    }
    assert_eq!(tradesim::ptx::ENTRIES.len(), kernel_names::ALL.len(), "entries: {:?}", tradesim::ptx::ENTRIES);
}

#[test]
fn module_is_self_contained() {
    assert!(!tradesim::ptx::PTX.contains(".extern .func"), "PTX calls external functions");
    let target = format!(".target {}", tradesim::ptx::ARCH);
    assert!(tradesim::ptx::PTX.contains(&target), "PTX is not built for {}", tradesim::ptx::ARCH);
}

#[test]
fn float_arithmetic_is_not_contracted() {
    let fused: Vec<&str> = tradesim::ptx::PTX.lines().filter(|l| l.trim_start().starts_with("fma.")).collect();
    assert!(fused.is_empty(), "fused multiply-adds in the PTX: {fused:?}");
    assert!(tradesim::ptx::PTX.contains("mul.rn.f64"), "expected explicitly rounded f64 multiplies");
}
