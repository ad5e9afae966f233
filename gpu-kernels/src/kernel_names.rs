//! The names of the PTX entry points, defined once.
//!
//! `build.rs` fails the build when the PTX lacks an `.entry` for any name in [`ALL`], and the host resolves
//! every one of them when it loads the module, so a renamed shim is caught at build time, not at launch.

/// One portfolio step for every env of a trial group (see [`crate::portfolio::step_env`]).
pub const PORTFOLIO_STEP: &str = "portfolio_step";

/// Every kernel the host expects in the PTX module.
pub const ALL: &[&str] = &[PORTFOLIO_STEP];
