//! Bad input to the simulation is refused with an error that names what is wrong; nothing panics.

use tradesim::{Backend, EnvBatch, EnvConfig, HostError, MarketData, PriceSeries, SimLayout, TrialParams};

fn prices() -> PriceSeries {
    PriceSeries::from_open_close(vec![100.0; 4], vec![100.0; 4])
}

fn sim(params: TrialParams, segments: &[(u32, u32)]) -> Result<EnvBatch, HostError> {
    let layout = SimLayout::new(1, segments.len()).unwrap();
    let market = MarketData::prices_only(&prices())?;
    let cfg = EnvConfig { segment_len: 1, ..EnvConfig::default() };
    let mut envs = EnvBatch::new(&Backend::Cpu, &market, &[params], layout, cfg)?;
    envs.reset_segments(segments)?;
    Ok(envs)
}

#[test]
fn invalid_parameters_name_trial_and_field() {
    let bad = TrialParams { spread: -0.1, ..TrialParams::frictionless(1_000.0) };
    let err = sim(bad, &[(0, 3)]).unwrap_err().to_string();
    assert!(err.contains("trial 0") && err.contains("spread = -0.1"), "{err}");
    let bad = TrialParams { initial_capital: f64::NAN, ..TrialParams::frictionless(1.0) };
    assert!(sim(bad, &[(0, 3)]).unwrap_err().to_string().contains("initial_capital"));
    let bad = TrialParams { whole_units: 2, ..TrialParams::frictionless(1.0) };
    assert!(sim(bad, &[(0, 3)]).unwrap_err().to_string().contains("whole_units = 2"));
}

#[test]
fn segments_must_fit_the_series() {
    let err = sim(TrialParams::frictionless(1.0), &[(0, 3), (2, 4)]).unwrap_err().to_string();
    assert!(err.contains("env 1") && err.contains("[2, 4]") && err.contains("4 bars"), "{err}");
    assert!(sim(TrialParams::frictionless(1.0), &[(3, 2)]).is_err());
}

#[test]
fn actions_are_checked_for_count_and_code() {
    let mut s = sim(TrialParams::frictionless(1.0), &[(0, 3), (0, 3)]).unwrap();
    let err = s.step(&[1]).unwrap_err().to_string();
    assert!(err.contains("expected 2, got 1"), "{err}");
    let err = s.scan(&[0, 1, 1, 7], 2).unwrap_err().to_string();
    assert!(err.contains("step 1, env 1") && err.contains("code 7"), "{err}");
}

#[test]
fn bad_prices_and_layouts_are_refused() {
    let err = PriceSeries::new(vec![1.0, 2.0], vec![1.0, 2.0], vec![1.0, -2.0], vec![1.0, 2.0]).unwrap_err();
    assert!(err.to_string().contains("bar 1: low = -2"), "{err}");
    let err = PriceSeries::new(vec![1.0], vec![1.0, 2.0], vec![1.0], vec![1.0]).unwrap_err();
    assert!(err.to_string().contains("high column length"), "{err}");
    assert!(SimLayout::new(0, 5).is_err());
    assert!(SimLayout::new(1 << 20, 1 << 13).is_err());
}

#[test]
fn market_data_and_config_are_checked() {
    let bar = tradesim::Bar { open: 1.0, high: 1.0, low: 1.0, close: 1.0, sigma: 0.0 };
    let bad_sigma = tradesim::Bar { sigma: f64::NAN, ..bar };
    let err = MarketData::from_bars(vec![bar, bad_sigma], Vec::new(), 0).unwrap_err().to_string();
    assert!(err.contains("bar 1: sigma"), "{err}");
    let err = MarketData::from_bars(vec![bar, bar], vec![0.0, f32::INFINITY], 1).unwrap_err().to_string();
    assert!(err.contains("feature 0 of bar 1"), "{err}");
    let market = MarketData::from_bars(vec![bar; 10], Vec::new(), 0).unwrap();
    let layout = SimLayout::new(1, 4).unwrap();
    let p = [TrialParams::frictionless(1.0)];
    let cfg = EnvConfig { segment_len: 2, ring_capacity: 3, ..EnvConfig::default() };
    let err = EnvBatch::new(&Backend::Cpu, &market, &p, layout, cfg).unwrap_err().to_string();
    assert!(err.contains("ring capacity 3"), "{err}");
    let cfg = EnvConfig { segment_len: 10, ..EnvConfig::default() };
    let err = EnvBatch::new(&Backend::Cpu, &market, &p, layout, cfg).unwrap_err().to_string();
    assert!(err.contains("segment length 10"), "{err}");
    let cfg = EnvConfig { segment_len: 2, ..EnvConfig::default() };
    let mut envs = EnvBatch::new(&Backend::Cpu, &market, &p, layout, cfg).unwrap();
    assert!(envs.sample(8).unwrap_err().to_string().contains("needs a replay ring"));
}
