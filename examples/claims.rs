//! One worker of `scripts/scale-postgres.sh --claims`: claims and finishes the trials of a study with no
//! training ([`tradesim::hyperopt::search::claim_loop`]) and prints each claim as `END SECONDS NUMBER` (the
//! claim's end in Unix seconds, the seconds spent finishing the previous trial and claiming this one, and
//! the trial's number).
//!
//! Usage: `claims STORAGE_URL STUDY_NAME TRIALS [SEED]` (the storage URL from the environment variable
//! `TRADESIM_STORAGE` when STORAGE_URL is `-`, so that its password stays off the command line).

use std::io::Write;

use tradesim::hyperopt::SearchConfig;
use tradesim::hyperopt::search::claim_loop;
use tradesim::hyperopt::storage::StorageUrl;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        return Err("usage: claims STORAGE_URL STUDY_NAME TRIALS [SEED]".into());
    }
    let url = if args[1] == "-" { std::env::var("TRADESIM_STORAGE")? } else { args[1].clone() };
    let storage = StorageUrl::parse(&url)?;
    let mut cfg = SearchConfig::default();
    cfg.study.trials = args[3].parse()?;
    cfg.study.parallel = 1;
    cfg.study.seed = args.get(4).map_or(Ok(5), |s| s.parse())?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut failed = None;
    claim_loop(&storage, &args[2], &cfg, |c| {
        if let Err(e) = writeln!(out, "{:.6} {:.6} {}", c.at, c.seconds, c.number) {
            failed.get_or_insert(e);
        }
    })?;
    out.flush()?;
    failed.map_or(Ok(()), |e| Err(e.into()))
}
