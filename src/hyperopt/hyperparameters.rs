//! Every hyperparameter a search samples, declared once: its name (the study's and the `[space]` table's
//! key), its type (which also says whether it takes whole numbers), the values it may take, its default
//! dimension for each learner, the value a stored trial without it had, and what it means. The default
//! spaces, the bounds the configuration is checked against, the sampler's integer axes, Optuna's
//! distributions, the typed [`Hyperparameters`] a trial plan converts ([`crate::hyperopt::plan`]), the CLI's
//! and Python's listings and docs/CLI.md's table all come from [`ALL`]; no other code names a parameter by
//! a string.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::train::Algo;

/// A trial's parameters by name.
pub type Params = BTreeMap<String, f64>;

/// One searched dimension.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged, deny_unknown_fields)]
pub enum Dimension {
    /// A fixed value.
    Fixed(f64),
    /// A range (log-uniform when `log`).
    Range {
        /// Lower bound.
        low: f64,
        /// Upper bound.
        high: f64,
        /// Search the logarithm.
        #[serde(default)]
        log: bool,
    },
    /// One of these values.
    Choice {
        /// The values.
        choices: Vec<f64>,
    },
}

/// A parameter's default for one learner.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LearnerDefault {
    /// Searched over `[low, high]` (on the log scale when `log`).
    Range(f64, f64, bool),
    /// Searched over these values.
    Choice(&'static [f64]),
    /// In the default space at this one value (a `[space]` key may search it).
    Fixed(f64),
    /// Not in the default space, but a `[space]` key of this learner; a trial without it takes this value.
    Unsearched(f64),
    /// Not a parameter of this learner: a `[space]` key for it is an error.
    No,
}

impl LearnerDefault {
    /// The default space's dimension (none when the parameter is not in the default space).
    pub fn dimension(self) -> Option<Dimension> {
        match self {
            Self::Range(low, high, log) => Some(Dimension::Range { low, high, log }),
            Self::Choice(c) => Some(Dimension::Choice { choices: c.to_vec() }),
            Self::Fixed(x) => Some(Dimension::Fixed(x)),
            Self::Unsearched(_) | Self::No => None,
        }
    }

    fn text(self) -> String {
        match self {
            Self::Range(low, high, log) => format!("{} .. {}{}", n(low), n(high), if log { " (log)" } else { "" }),
            Self::Choice(c) => format!("{{{}}}", c.iter().map(|&x| n(x)).collect::<Vec<_>>().join(", ")),
            Self::Fixed(x) => n(x),
            Self::Unsearched(x) => format!("not searched ({})", n(x)),
            Self::No => "-".to_owned(),
        }
    }
}

/// A number as the table writes it: scientific below 1e-3 and from 1e5.
fn n(x: f64) -> String {
    if x != 0.0 && (x.abs() < 1e-3 || x.abs() >= 1e5) { format!("{x:e}") } else { format!("{x}") }
}

/// One hyperparameter's declaration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Param {
    /// The key in the study, the `[space]` table and the reports.
    pub name: &'static str,
    /// Whether it takes whole numbers (ranges of it are sampled as integers, both ends included).
    pub integer: bool,
    /// The smallest value it may take.
    pub min: f64,
    /// The largest value it may take.
    pub max: f64,
    /// DQN's default.
    pub dqn: LearnerDefault,
    /// PPO's default.
    pub ppo: LearnerDefault,
    /// The value of a stored trial without it (a trial from before it existed); `None`: such a trial is
    /// refused, naming the parameter.
    pub stored: Option<f64>,
    /// What it means.
    pub about: &'static str,
}

impl Param {
    /// Its default for `algo`.
    pub fn default_for(&self, algo: Algo) -> LearnerDefault {
        match algo {
            Algo::Dqn => self.dqn,
            Algo::Ppo => self.ppo,
        }
    }

    /// Whether `algo`'s `[space]` may name it.
    pub fn known(&self, algo: Algo) -> bool {
        self.default_for(algo) != LearnerDefault::No
    }

    /// Its value in trial parameters `p` of `algo`: the sampled value, else the learner's unsearched value
    /// (0 for a parameter the learner does not have), else the stored-trial default, else an error.
    pub fn value_in(&self, p: &Params, algo: Algo) -> Result<f64, Error> {
        if let Some(v) = p.get(self.name) {
            return Ok(*v);
        }
        match self.default_for(algo) {
            LearnerDefault::Unsearched(v) => Ok(v),
            LearnerDefault::No => Ok(0.0),
            _ => self.stored.ok_or_else(|| Error::Study(format!("trial parameters lack `{}`", self.name))),
        }
    }

    /// Its value in `p`, or `absent` when `p` lacks it.
    pub fn or(&self, p: &Params, absent: f64) -> f64 {
        p.get(self.name).copied().unwrap_or(absent)
    }
}

/// A value type of a hyperparameter: how a sampled number becomes it.
pub trait Value: Copy {
    /// Whether it takes whole numbers.
    const INTEGER: bool;
    /// The sampled number as this type.
    fn from_f64(x: f64) -> Self;
}

impl Value for f64 {
    const INTEGER: bool = false;
    fn from_f64(x: f64) -> Self {
        x
    }
}

impl Value for f32 {
    const INTEGER: bool = false;
    fn from_f64(x: f64) -> Self {
        x as f32
    }
}

impl Value for u32 {
    const INTEGER: bool = true;
    fn from_f64(x: f64) -> Self {
        x as u32
    }
}

impl Value for bool {
    const INTEGER: bool = true;
    fn from_f64(x: f64) -> Self {
        x != 0.0
    }
}

/// Declares each hyperparameter once: a constant [`Param`], its field of [`Hyperparameters`], and [`ALL`].
macro_rules! hyperparameters {
    ($( $(#[doc = $doc:literal])+
        $konst:ident $field:ident: $ty:ty, [$min:expr, $max:expr], dqn $dqn:expr, ppo $ppo:expr, stored $stored:expr;
    )*) => {
        $(
            $(#[doc = $doc])+
            pub const $konst: Param = Param {
                name: stringify!($field),
                integer: <$ty as Value>::INTEGER,
                min: $min,
                max: $max,
                dqn: $dqn,
                ppo: $ppo,
                stored: $stored,
                about: concat!($($doc),+),
            };
        )*

        /// Every hyperparameter, in declaration order.
        pub const ALL: &[Param] = &[$($konst),*];

        /// A trial's hyperparameters, typed: each field filled from its [`Param`] (a parameter the learner
        /// does not have is 0).
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct Hyperparameters {
            $( $(#[doc = $doc])+ pub $field: $ty, )*
        }

        impl Hyperparameters {
            /// Trial parameters `p` of `algo`, typed ([`Param::value_in`]).
            pub fn read(p: &Params, algo: Algo) -> Result<Self, Error> {
                Ok(Self { $( $field: <$ty as Value>::from_f64($konst.value_in(p, algo)?), )* })
            }
        }
    };
}

use LearnerDefault::{Choice, Fixed, No, Range, Unsearched};

hyperparameters! {
    /// Adam's learning rate.
    LR lr: f32, [1e-7, 1.0], dqn Range(1e-4, 3e-3, true), ppo Range(1e-4, 3e-3, true), stored None;
    /// The discount factor.
    GAMMA gamma: f32, [0.0, 1.0], dqn Range(0.8, 0.99, false), ppo Range(0.8, 0.99, false), stored None;
    /// Units of each of the two hidden layers.
    HIDDEN hidden: u32, [1.0, 1024.0], dqn Choice(&[32.0, 64.0, 128.0]), ppo Choice(&[32.0, 64.0, 128.0]),
        stored None;
    /// Minibatch size (PPO: only with `minibatches = 0`, a fixed batch drawn with replacement).
    BATCH batch: u32, [1.0, 8192.0], dqn Choice(&[64.0, 128.0]), ppo Unsearched(1.0), stored None;
    /// DQN: share of a trial's env steps over which epsilon falls from 1 to 0.05.
    EPS_DECAY eps_decay: f64, [0.0, 1.0], dqn Range(0.2, 0.8, false), ppo No, stored None;
    /// DQN: gradient steps between target-network copies.
    TARGET_EVERY target_every: u32, [1.0, 1e6], dqn Choice(&[50.0, 100.0, 200.0]), ppo No, stored None;
    /// PPO: GAE's lambda.
    LAMBDA lambda: f32, [0.0, 1.0], dqn No, ppo Range(0.8, 0.99, false), stored None;
    /// PPO: the clip range of the policy ratio.
    CLIP clip: f32, [0.01, 1.0], dqn No, ppo Range(0.1, 0.3, false), stored None;
    /// PPO: the entropy bonus's weight.
    ENT_COEF ent_coef: f32, [0.0, 1.0], dqn No, ppo Range(0.0, 0.02, false), stored None;
    /// PPO: update epochs over each rollout.
    PPO_EPOCHS ppo_epochs: u32, [1.0, 100.0], dqn No, ppo Choice(&[2.0, 4.0]), stored None;
    /// PPO: minibatches each rollout is cut into (0: a fixed `batch` drawn with replacement).
    MINIBATCHES minibatches: u32, [0.0, 65_536.0], dqn No, ppo Fixed(32.0), stored None;
    /// PPO: the global gradient-norm clip.
    MAX_GRAD_NORM max_grad_norm: f32, [0.0, 1e6], dqn No, ppo Fixed(0.5), stored None;
    /// PPO: 1 clips the value loss as the policy's (CleanRL's `clip_vloss`).
    CLIP_VLOSS clip_vloss: u32, [0.0, 1.0], dqn No, ppo Fixed(1.0), stored None;
    /// PPO: 1 anneals the learning rate linearly to 0 over the run's rollouts.
    ANNEAL_LR anneal_lr: bool, [0.0, 1.0], dqn No, ppo Fixed(1.0), stored None;
    /// PPO: Adam's epsilon.
    ADAM_EPS adam_eps: f32, [1e-12, 1.0], dqn No, ppo Fixed(1e-5), stored None;
    /// PPO: 1 initializes the layers orthogonally (CleanRL's gains), 0 as DQN does.
    ORTHOGONAL_INIT orthogonal_init: u32, [0.0, 1.0], dqn No, ppo Fixed(1.0), stored None;
    /// PPO: 1 normalizes the advantages of each minibatch (a trial stored before it existed: 0).
    NORM_ADV norm_adv: u32, [0.0, 1.0], dqn No, ppo Fixed(1.0), stored Some(0.0);
    /// PPO: the hidden activation, 1 tanh, 0 ReLU; fixed only: the trials trained at once share their
    /// layers' launches (a trial stored before it existed: ReLU).
    ACTIVATION activation: u32, [0.0, 1.0], dqn No, ppo Fixed(gpu_kernels::mlp::ACT_TANH as f64),
        stored Some(gpu_kernels::mlp::ACT_RELU as f64);
    /// The reward's weight of trading costs (of the percent log return's scale).
    W_COST w_cost: f64, [-1e3, 1e3], dqn Range(0.0, 2.0, false), ppo Range(0.0, 2.0, false), stored None;
    /// The reward's weight of new drawdown.
    W_DRAWDOWN w_drawdown: f64, [-1e3, 1e3], dqn Range(0.0, 1.0, false), ppo Range(0.0, 1.0, false),
        stored None;
    /// The reward's weight of a barrier exit's label.
    W_BARRIER w_barrier: f64, [-1e3, 1e3], dqn Fixed(0.0), ppo Fixed(0.0), stored None;
    /// 0: no take-profit, stop-loss or holding limit (a position is held until the policy changes it);
    /// 1: the three barriers below (a trial stored before it existed: 1).
    BARRIERS barriers: bool, [0.0, 1.0], dqn Choice(&[0.0, 1.0]), ppo Choice(&[0.0, 1.0]), stored Some(1.0);
    /// The take-profit barrier in multiples of the volatility (0 disables it).
    TAKE_PROFIT_MULT take_profit_mult: f64, [0.0, 100.0], dqn Range(1.0, 5.0, false),
        ppo Range(1.0, 5.0, false), stored None;
    /// The stop-loss barrier in multiples of the volatility (0 disables it).
    STOP_LOSS_MULT stop_loss_mult: f64, [0.0, 100.0], dqn Range(1.0, 5.0, false), ppo Range(1.0, 5.0, false),
        stored None;
    /// The holding limit in bars (0: none).
    MAX_HOLD_BARS max_hold_bars: u32, [0.0, 1e6], dqn Choice(&[0.0, 24.0, 96.0]),
        ppo Choice(&[0.0, 24.0, 96.0]), stored None;
}

/// The declaration of the parameter named `name`.
pub fn find(name: &str) -> Option<&'static Param> {
    ALL.iter().find(|p| p.name == name)
}

/// `algo`'s default space.
pub fn space_for(algo: Algo) -> BTreeMap<String, Dimension> {
    ALL.iter().filter_map(|p| p.default_for(algo).dimension().map(|d| (p.name.to_owned(), d))).collect()
}

/// The parameters as a Markdown table (docs/CLI.md's, `tradesim hyperopt --list-params`).
pub fn markdown_table() -> String {
    let mut out = String::from(
        "| parameter | type | allowed | DQN default | PPO default | a stored trial without it | meaning |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for p in ALL {
        let kind = if p.integer { "integer" } else { "number" };
        let stored = p.stored.map_or_else(|| "refused".to_owned(), n);
        let about = p.about.split_whitespace().collect::<Vec<_>>().join(" ");
        out += &format!(
            "| `{}` | {kind} | {} .. {} | {} | {} | {stored} | {about} |\n",
            p.name,
            n(p.min),
            n(p.max),
            p.dqn.text(),
            p.ppo.text(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every default lies within the parameter's bounds and is whole for an integer parameter, and every
    /// learner's space has its learning parameters and the environment's.
    #[test]
    fn the_defaults_are_allowed_values() {
        for p in ALL {
            for algo in [Algo::Dqn, Algo::Ppo] {
                let values: Vec<f64> = match p.default_for(algo) {
                    Range(low, high, _) => vec![low, high],
                    Choice(c) => c.to_vec(),
                    Fixed(x) | Unsearched(x) => vec![x],
                    No => vec![],
                };
                for x in values {
                    assert!((p.min..=p.max).contains(&x), "{} {algo}: {x}", p.name);
                    assert!(!p.integer || x.fract() == 0.0, "{} {algo}: {x}", p.name);
                }
            }
        }
        for algo in [Algo::Dqn, Algo::Ppo] {
            let space = space_for(algo);
            for name in [LR.name, GAMMA.name, HIDDEN.name, W_COST.name, BARRIERS.name] {
                assert!(space.contains_key(name), "{algo}: {name}");
            }
        }
        assert!(
            space_for(Algo::Dqn).contains_key(EPS_DECAY.name) && !space_for(Algo::Ppo).contains_key(EPS_DECAY.name)
        );
    }

    /// A trial is read with its learner's unsearched values and the stored-trial defaults; a parameter its
    /// learner needs and has no default for is refused by name.
    #[test]
    fn reading_a_trial_fills_defaults_and_refuses_what_is_missing() {
        let mut p: Params = space_for(Algo::Ppo)
            .into_iter()
            .map(|(k, d)| {
                let v = match d {
                    Dimension::Fixed(x) => x,
                    Dimension::Range { low, .. } => low,
                    Dimension::Choice { choices } => choices[0],
                };
                (k, v)
            })
            .collect();
        p.remove(NORM_ADV.name);
        p.remove(BARRIERS.name);
        let h = Hyperparameters::read(&p, Algo::Ppo).unwrap();
        assert_eq!((h.batch, h.norm_adv, h.barriers, h.eps_decay), (1, 0, true, 0.0));
        assert_eq!(h.activation, gpu_kernels::mlp::ACT_TANH);
        p.remove(CLIP.name);
        let e = Hyperparameters::read(&p, Algo::Ppo).unwrap_err().to_string();
        assert!(e.contains("`clip`"), "{e}");
    }

    /// docs/CLI.md's copy of the table is the table.
    #[test]
    fn the_docs_table_is_generated_from_the_declaration() {
        let docs = include_str!("../../docs/CLI.md");
        let start = docs.find("<!-- hyperparameters (generated) -->\n").expect("the table's start marker") + 37;
        let end = docs.find("  <!-- /hyperparameters -->").expect("the table's end marker");
        let copy: String = docs[start..end].lines().map(|l| format!("{}\n", l.trim_start())).collect();
        assert_eq!(copy, markdown_table(), "docs/CLI.md: paste `tradesim hyperopt --list-params` between the markers");
    }

    #[test]
    fn the_table_lists_every_parameter_once() {
        let t = markdown_table();
        for p in ALL {
            assert_eq!(t.matches(&format!("| `{}` |", p.name)).count(), 1, "{}", p.name);
        }
        assert_eq!(t.lines().count(), ALL.len() + 2);
    }
}
