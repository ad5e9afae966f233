//! `tradesim hyperopt`: the main job. A TPE search over DQN or PPO (learning, network, reward, barrier)
//! hyperparameters, K trials trained at once on the device, pruned by the median rule, persisted in an
//! Optuna study on SQLite or PostgreSQL (a killed search resumes with nothing lost or counted twice; several
//! workers share one study), reported as HTML (SVG charts), JSON and CSV, with the best trial re-evaluated
//! on the test split by the backtest engine and audited in Decimal, and its evidence (`crate::evidence`:
//! deflated Sharpe, PBO, placebo searches, walk-forward, the verdict).

pub mod artifacts;
pub mod best;
pub mod config;
pub mod db;
pub mod hyperparameters;
pub mod ledger;
pub mod plan;
pub mod ranking;
pub mod sampler;
pub mod search;
pub mod storage;
pub mod study;
pub mod tls;

pub use config::SearchConfig;
pub use search::{Progress, SearchPaths, run_search};
pub use study::{Open, Study};
