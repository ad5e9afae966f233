//! The PTX built at `cargo build`: every kernel the host launches is an entry, nothing is external, and
//! float arithmetic is not contracted into FMA behind the code's back (only the explicit, correctly rounded
//! FMAs of the product tiles, which the CPU matches with `f32::mul_add`).
#![cfg(feature = "cuda")]

use gpu_kernels::registry;

#[test]
fn every_expected_kernel_is_an_entry() {
    for name in registry::ALL {
        let entry = format!(".visible .entry {name}(");
        assert!(tradesim::ptx::PTX.contains(&entry), "PTX lacks `{entry}`");
        assert!(tradesim::ptx::ENTRIES.contains(name), "generated ENTRIES lacks {name}");
    }
    assert_eq!(tradesim::ptx::ENTRIES.len(), registry::ALL.len(), "entries: {:?}", tradesim::ptx::ENTRIES);
}

#[test]
fn module_is_self_contained() {
    assert!(!tradesim::ptx::PTX.contains(".extern .func"), "PTX calls external functions");
    let target = format!(".target {}", tradesim::ptx::ARCH);
    assert!(tradesim::ptx::PTX.contains(&target), "PTX is not built for {}", tradesim::ptx::ARCH);
}

/// Every module built: the base one and, where built, the newer one (sm_90).
fn modules() -> Vec<&'static str> {
    [tradesim::ptx::PTX].into_iter().chain(tradesim::ptx::NEWER.map(|(_, ptx)| ptx)).collect()
}

/// Each line of `ptx` with the kernel whose body holds it (`None` before the first entry).
fn by_entry(ptx: &'static str) -> Vec<(Option<&'static str>, &'static str)> {
    let mut entry = None;
    ptx.lines()
        .map(|l| {
            let t = l.trim_start();
            if let Some(rest) = t.strip_prefix(".visible .entry ") {
                entry = rest.split('(').next();
            } else if t.starts_with(".func") || t.starts_with(".visible .func") {
                entry = Some(DEVICE_FUNCTION);
            }
            (entry, l)
        })
        .collect()
}

/// What [`by_entry`] names the lines of a device function (`.func`, e.g. the out-of-line `tanhf`): code a
/// kernel calls, after its grid-dependency wait.
const DEVICE_FUNCTION: &str = "(device function)";

#[test]
fn every_async_copy_is_in_the_group_its_wait_waits_for() {
    // `cp.async.wait_group N` waits for committed groups only: a copy issued after the last
    // `cp.async.commit_group` is not waited for, and the barrier after the wait does not order it before
    // the reads (mlp_chain's second W2 copy was such a race, found by `compute-sanitizer --tool racecheck`
    // on the H200 and by refill tests that failed in some runs). So in every kernel, in the PTX's order, no
    // `wait_group` follows a copy without a commit (or a `wait_all`, which commits) between them.
    let (mut pending, mut waits) = (None, 0);
    let mut entry_seen = None;
    for (entry, line) in modules().into_iter().flat_map(by_entry) {
        if entry != entry_seen {
            (pending, entry_seen) = (None, entry);
        }
        let l = line.trim();
        if l.contains("cp.async.commit_group") || l.contains("cp.async.wait_all") {
            pending = None;
        } else if l.contains("cp.async.wait_group") {
            waits += 1;
            assert!(pending.is_none(), "{entry:?}: `{l}` after the uncommitted copy `{}`", pending.unwrap_or(""));
        } else if l.contains("cp.async.ca.") || l.contains("cp.async.cg.") {
            pending = Some(l);
        }
    }
    assert!(waits > 0, "the chains should stage their weights with cp.async and wait for them");
}

#[test]
fn float_arithmetic_is_not_contracted() {
    // The only fused multiply-adds are the explicit f32 ones of the product contract (`tile::fma`: the tiles,
    // the fused layer chains, the staged products, the fused backward pass, the greedy walk's units, the layer-2 hidden gradients of
    // the loss kernels, PPO's gradient-norm and advantage lanes), which the CPU backend runs as `f32::mul_add`: a*b+c is
    // never contracted behind the code's back.
    let allowed = [
        registry::GEMM_TILES,
        registry::MLP_CHAIN,
        registry::MLP_CHAIN_WIDE,
        registry::DQN_ACT,
        registry::PPO_ACT,
        registry::MLP_ROWS,
        registry::MLP_ROWS_WIDE,
        registry::MLP_BACKWARD,
        registry::MLP_GRADIENTS,
        registry::DQN_TD,
        registry::PPO_LOSS,
        registry::GREEDY_WALK,
        registry::GREEDY_WALK_REGS,
        registry::FMA_PEAK,
        registry::PPO_NORM,
        registry::PPO_ADV,
    ];
    let fused: Vec<_> =
        modules().into_iter().flat_map(by_entry).filter(|(_, l)| l.trim_start().starts_with("fma.")).collect();
    assert!(!fused.is_empty(), "the product tiles should use fma.rn.f32");
    for (entry, line) in fused {
        assert!(line.trim_start().starts_with("fma.rn.f32"), "an FMA that is not fma.rn.f32: {line}");
        assert!(entry.is_some_and(|e| allowed.contains(&e)), "an FMA in {entry:?}: {line}");
    }
    assert!(tradesim::ptx::PTX.contains("mul.rn.f64"), "expected explicitly rounded f64 multiplies");
}

#[test]
fn launch_bounds_are_written_into_their_entries() {
    for lines in modules().into_iter().map(by_entry) {
        for &(kernel, threads, blocks) in registry::LAUNCH_BOUNDS {
            let body: Vec<&str> = lines.iter().filter(|(e, _)| *e == Some(kernel)).map(|(_, l)| l.trim()).collect();
            // The directives sit between the parameter list and the body's opening brace.
            let brace = body.iter().position(|l| *l == "{").unwrap_or_else(|| panic!("{kernel} has no body"));
            let header = &body[..brace];
            let count = |directive: &str| header.iter().filter(|l| **l == directive).count();
            assert_eq!(count(&format!(".maxntid {threads}, 1, 1")), 1, "{kernel}: {header:?}");
            assert_eq!(count(&format!(".minnctapersm {blocks}")), usize::from(blocks > 0), "{kernel}: {header:?}");
        }
    }
}

#[test]
fn the_newer_module_has_every_kernel_and_each_waits_for_its_predecessor_before_touching_memory() {
    // Kernels of the sm_90 module are launched with programmatic stream serialization: one may start while
    // the kernel before it runs, so it must not read or write memory before `griddepcontrol.wait`.
    let newest = registry::sm_number(registry::DEPENDENT_LAUNCH_ARCH).expect("an sm_NN target");
    let older = registry::sm_number(tradesim::ptx::ARCH).is_some_and(|n| n < newest);
    let Some((arch, ptx)) = tradesim::ptx::NEWER else {
        assert!(!older, "ARCH {} is older than sm_90, but no sm_90 module was built", tradesim::ptx::ARCH);
        return;
    };
    assert_eq!(arch, registry::DEPENDENT_LAUNCH_ARCH);
    assert!(ptx.contains(".target sm_90"), "the newer module is not built for sm_90");
    assert!(!ptx.contains(".extern .func"), "the newer module calls external functions");
    // The older module has no such instruction: its kernels are launched the classic way.
    assert!(!tradesim::ptx::PTX.contains("griddepcontrol"), "the {} module uses griddepcontrol", tradesim::ptx::ARCH);
    let mut checked = Vec::new();
    let (mut current, mut waited, mut triggered) = (None, false, false);
    for (entry, line) in by_entry(ptx) {
        if entry == Some(DEVICE_FUNCTION) {
            continue; // called by a kernel after its wait
        }
        if entry != current {
            if let Some(name) = current {
                assert!(waited && triggered, "{name}: no griddepcontrol.wait / launch_dependents");
                checked.push(name);
            }
            (current, waited, triggered) = (entry, false, false);
        }
        let l = line.trim();
        if l.starts_with("griddepcontrol.wait") {
            waited = true;
        } else if l.starts_with("griddepcontrol.launch_dependents") {
            assert!(waited, "{entry:?}: launch_dependents before the wait");
            triggered = true;
        }
        // The kernels of EARLY_READS may read (the weights) before the wait, never write global memory.
        let early = entry.is_some_and(|e| registry::EARLY_READS.contains(&e));
        let memory: &[&str] = if early {
            &["st.global", "st.u", "st.f", "st.v", "st.b", "atom.", "red."]
        } else {
            &["ld.", "st.", "cp.async", "atom.", "red.", "prefetch"]
        };
        let touches = memory.iter().any(|op| l.starts_with(op)) && !l.starts_with("ld.param");
        assert!(!touches || waited, "{entry:?}: `{l}` before griddepcontrol.wait");
    }
    if let Some(name) = current {
        assert!(waited && triggered, "{name}: no griddepcontrol.wait / launch_dependents");
        checked.push(name);
    }
    checked.sort_unstable();
    let mut all = registry::ALL.to_vec();
    all.sort_unstable();
    assert_eq!(checked, all, "the newer module's entries");
}

/// The SM of a cubin's ELF header (`EM_CUDA` images only): `e_flags` holds it in its low byte up to ELF ABI
/// version 7 (ptxas of CUDA 12), in its second byte from version 8 (CUDA 13).
fn cubin_sm(image: &[u8]) -> Option<u32> {
    const EM_CUDA: u16 = 190;
    let machine = u16::from_le_bytes(image.get(18..20)?.try_into().ok()?);
    if image.get(..4)? != b"\x7fELF" || image.get(4) != Some(&2) || machine != EM_CUDA {
        return None;
    }
    let flags = u32::from_le_bytes(image.get(48..52)?.try_into().ok()?);
    Some(if image[8] >= 8 { (flags >> 8) & 0xff } else { flags & 0xff })
}

#[test]
fn each_cubin_is_machine_code_for_its_target_compiled_from_a_module_of_that_target() {
    // Without a ptxas at build time there are none, and nothing names a ptxas.
    assert_eq!(tradesim::ptx::CUBINS.is_empty(), tradesim::ptx::PTXAS.is_none(), "PTXAS {:?}", tradesim::ptx::PTXAS);
    let targets: Vec<&str> =
        [tradesim::ptx::ARCH].into_iter().chain(tradesim::ptx::NEWER.map(|(arch, _)| arch)).collect();
    for (arch, image) in tradesim::ptx::CUBINS {
        assert_eq!(cubin_sm(image), registry::sm_number(arch), "the {arch} cubin's ELF header");
        // Its PTX is embedded too: the runtime falls back to it where the driver refuses the cubin.
        assert!(targets.contains(arch), "a {arch} cubin, but PTX only for {targets:?}");
        // Every kernel, by its symbol (a NUL-terminated name in the string table).
        for name in registry::ALL {
            let symbol = [&[0u8][..], name.as_bytes(), &[0]].concat();
            assert!(image.windows(symbol.len()).any(|w| w == symbol), "the {arch} cubin lacks `{name}`");
        }
    }
}

#[test]
fn a_cubins_architecture_is_read_from_its_elf_header() {
    // The first 52 bytes of ptxas 12.9's sm_90 cubin: ELF64, ABI version 7, EM_CUDA, e_flags 0x005a055a.
    let mut header = [0u8; 52];
    header[..9].copy_from_slice(b"\x7fELF\x02\x01\x01\x33\x07");
    header[18..20].copy_from_slice(&190u16.to_le_bytes());
    header[48..52].copy_from_slice(&0x005a_055au32.to_le_bytes());
    assert_eq!(cubin_sm(&header), Some(90));
    // ptxas 13.0's: ABI version 8, the SM in the second byte of e_flags 0x06005a04.
    header[7..9].copy_from_slice(&[0x41, 8]);
    header[48..52].copy_from_slice(&0x0600_5a04u32.to_le_bytes());
    assert_eq!(cubin_sm(&header), Some(90));
    // Not a CUDA image: x86-64's e_machine.
    header[18..20].copy_from_slice(&62u16.to_le_bytes());
    assert_eq!(cubin_sm(&header), None);
    assert_eq!(cubin_sm(b"\x7fELF"), None);
}
