//! Issue 53 item 5: Hansen's SPA and Romano and Wolf's StepM (`tradesim::evidence::spa`) agree with Kevin
//! Sheppard's `arch` (`arch.bootstrap.SPA`, `StepM`; tests/evidence_spa_reference.py, run with the python
//! of `scripts/setup-arch.sh`, which `scripts/test.sh` sets as `TRADESIM_ARCH_PYTHON`) on the same data at
//! 10,000 bootstrap draws: the variances of the differentials to 1e-9 relative (no randomness), the
//! p-values within Monte-Carlo error (the two bootstraps draw different random numbers), StepM's superior
//! models exactly where they are clear. The properties that need no reference run everywhere.

use std::process::Command;

use tradesim::evidence::spa::{SpaConfig, default_block, kernel_variance, spa};

#[path = "common/normal.rs"]
mod normal;
use normal::Normal;

impl Normal {
    /// `t` returns: `drift` plus AR(1) noise (coefficient 0.2) of scale 0.01, so blocks matter.
    fn series(&mut self, t: usize, drift: f64) -> Vec<f64> {
        let mut e = 0.0;
        (0..t)
            .map(|_| {
                e = 0.2 * e + 0.01 * self.draw();
                drift + e
            })
            .collect()
    }
}

/// A case: benchmark and models.
struct Case {
    benchmark: Vec<f64>,
    models: Vec<Vec<f64>>,
}

fn case(seed: u64, t: usize, drifts: &[f64]) -> Case {
    let mut g = Normal(seed);
    Case { benchmark: g.series(t, 0.0), models: drifts.iter().map(|&d| g.series(t, d)).collect() }
}

const REPS: usize = 10_000;

fn cfg(t: usize, studentize: bool) -> SpaConfig {
    SpaConfig { reps: REPS, block: default_block(t), seed: 5, studentize, size: 0.05 }
}

/// Weak models (p-values inside (0, 1)) and two clear winners among nulls (StepM's set is unambiguous).
fn cases() -> Vec<Case> {
    vec![
        case(1, 1_000, &[0.0, 2e-4, 4e-4, -3e-4, 0.0, 5e-4]),
        case(2, 1_500, &[-1e-4, 3e-4, -2e-3, 1e-4]),
        case(3, 1_000, &[3e-3, 2.5e-3, 0.0, 0.0, -1e-3, 0.0]),
    ]
}

#[test]
fn spa_is_deterministic_and_its_p_values_are_ordered() {
    for c in cases() {
        for studentize in [false, true] {
            let cfg = SpaConfig { reps: 500, ..cfg(c.benchmark.len(), studentize) };
            let r = spa(&c.models, &c.benchmark, &cfg).unwrap();
            assert_eq!(r, spa(&c.models, &c.benchmark, &cfg).unwrap());
            assert!(r.lower <= r.consistent && r.consistent <= r.upper, "{r:?}");
        }
    }
    // The clear winners are found by StepM and make SPA reject.
    let c = &cases()[2];
    let r = spa(&c.models, &c.benchmark, &SpaConfig { reps: 500, ..cfg(1_000, true) }).unwrap();
    assert_eq!(r.superior, vec![0, 1]);
    assert!(r.consistent < 0.01, "{r:?}");
}

#[test]
fn agrees_with_arch() {
    let Ok(python) = std::env::var("TRADESIM_ARCH_PYTHON") else {
        assert!(std::env::var_os("CI").is_none(), "CI must run the arch check: TRADESIM_ARCH_PYTHON is unset");
        eprintln!("skipped: TRADESIM_ARCH_PYTHON is unset (scripts/test.sh sets it from scripts/setup-arch.sh)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("tradesim-spa-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cases = cases();
    let input: Vec<serde_json::Value> = cases
        .iter()
        .map(|c| {
            serde_json::json!({
                "benchmark": c.benchmark, "models": c.models, "block": default_block(c.benchmark.len()),
                "reps": REPS, "seed": 5, "size": 0.05,
            })
        })
        .collect();
    let (inp, out) = (dir.join("in.json"), dir.join("out.json"));
    std::fs::write(&inp, serde_json::to_string(&input).unwrap()).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/evidence_spa_reference.py");
    let run = Command::new(python).arg(script).arg(&inp).arg(&out).output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let arch: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let mut interior = 0;
    for (c, a) in cases.iter().zip(&arch) {
        let t = c.benchmark.len();
        let diff: Vec<Vec<f64>> =
            c.models.iter().map(|m| m.iter().zip(&c.benchmark).map(|(x, b)| x - b).collect()).collect();
        for (ours, theirs) in
            kernel_variance(&diff, default_block(t)).iter().zip(a["raw"]["variance"].as_array().unwrap())
        {
            let theirs = theirs.as_f64().unwrap();
            assert!((ours - theirs).abs() <= 1e-9 * theirs.abs(), "variance {ours} against arch's {theirs}");
        }
        for (studentize, key) in [(false, "raw"), (true, "studentized")] {
            let r = spa(&c.models, &c.benchmark, &cfg(t, studentize)).unwrap();
            for (name, ours) in [("lower", r.lower), ("consistent", r.consistent), ("upper", r.upper)] {
                let theirs = a[key][name].as_f64().unwrap();
                // Two independent estimates of p from 10,000 draws each: 4 standard errors of their difference.
                let p = (ours + theirs) / 2.0;
                let tolerance = 4.0 * (2.0 * p * (1.0 - p) / REPS as f64).sqrt() + 1e-4;
                assert!((ours - theirs).abs() <= tolerance, "{key} {name}: {ours} against arch's {theirs}");
                interior += usize::from(p > 0.02 && p < 0.98);
            }
            let theirs: Vec<usize> =
                a[key]["superior"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
            assert_eq!(r.superior, theirs, "{key}: StepM");
        }
    }
    // The comparison means something: most p-values are away from 0 and 1.
    assert!(interior >= 8, "only {interior} p-values inside (0.02, 0.98)");
    std::fs::remove_dir_all(dir).unwrap();
}
