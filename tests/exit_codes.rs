//! The command line's exit codes follow the error's kind (`tradesim::Error::exit_code`): 2 for bad input
//! (unusable data, a bad flag or configuration key), 1 for a failure while running (an output that cannot be
//! written), and the message names the file, row, field, key or flag.

use std::path::PathBuf;
use std::process::Command;

fn tradesim(args: &[&str]) -> (Option<i32>, String) {
    let bin = std::env::var("TRADESIM_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tradesim").to_owned());
    let out = Command::new(bin).args(args).output().expect("run tradesim");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tradesim-exit-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn unusable_data_exits_2_naming_file_row_and_field() {
    let dir = scratch("data");
    let csv = dir.join("bars.csv");
    std::fs::write(
        &csv,
        "time,open,high,low,close,volume\n2020-01-01T00:00:00Z,1,2,0.5,1.5,10\n2020-01-01T01:00:00Z,abc,2,0.5,1.5,10\n",
    )
    .unwrap();
    let (code, err) = tradesim(&["backtest", "--device", "cpu", "--data", csv.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("bars.csv:3:open") && err.contains("`abc` is not a number"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_flags_and_configuration_keys_exit_2_naming_them() {
    let (code, err) = tradesim(&["backtest", "--device", "cpu", "--synthetic", "3000", "--fast", "0"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--fast"), "{err}");
    let dir = scratch("config");
    let cfg = dir.join("search.toml");
    std::fs::write(&cfg, "[study]\ntrails = 3\n").unwrap();
    let study = dir.join("study.sqlite");
    let (code, err) = tradesim(&[
        "hyperopt",
        "--device",
        "cpu",
        "--synthetic",
        "3000",
        "--config",
        cfg.to_str().unwrap(),
        "--study",
        study.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("search.toml") && err.contains("trails"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_output_that_cannot_be_written_exits_1_naming_the_file() {
    let dir = scratch("output");
    let missing = dir.join("no-such-folder").join("bt.json");
    let (code, err) =
        tradesim(&["backtest", "--device", "cpu", "--synthetic", "3000", "--json", missing.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("no-such-folder/bt.json"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// The tests' hooks (`TRADESIM_FAILPOINT`, `TRADESIM_TEST_CLOCK_SKEW_SECONDS`) are refused when malformed,
/// naming the variable, before the command runs: a test that sets one wrongly fails instead of running
/// without it.
#[test]
fn malformed_test_hooks_exit_2_naming_the_variable() {
    let bin = std::env::var("TRADESIM_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tradesim").to_owned());
    for (var, value) in [
        ("TRADESIM_FAILPOINT", "finish"),
        ("TRADESIM_FAILPOINT", "finish:0"),
        ("TRADESIM_FAILPOINT", "finsh:1"),
        ("TRADESIM_TEST_CLOCK_SKEW_SECONDS", "ten"),
        ("TRADESIM_TEST_CLOCK_SKEW_SECONDS", "1e13"),
    ] {
        let out = Command::new(&bin).args(["data", "check"]).env(var, value).output().expect("run tradesim");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{var}={value}: {err}");
        assert!(err.contains(var) && err.contains(&format!("`{value}`")), "{var}={value}: {err}");
    }
    let ok = Command::new(&bin).args(["data", "check"]).env("TRADESIM_FAILPOINT", "finish:3").output().unwrap();
    assert_eq!(ok.status.code(), Some(0), "{}", String::from_utf8_lossy(&ok.stderr));
}
