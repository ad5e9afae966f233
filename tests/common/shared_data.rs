//! The shared folder of real data, for the tests that read it (included by path, as `normal.rs` is).

use std::path::{Path, PathBuf};

/// The shared folder of real data: TRADESIM_SHARED_DATA, else `../shared/data` beside the checkout. CI must
/// have it; elsewhere its absence skips the test, saying so.
pub fn shared_data() -> Option<PathBuf> {
    let dir = std::env::var("TRADESIM_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data"));
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(std::env::var_os("CI").is_none(), "CI must have the shared data at {}", dir.display());
    eprintln!("skipped: no shared data at {}", dir.display());
    None
}
