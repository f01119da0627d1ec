//! The architecture module: [`NetworkSpec`], a policy network described
//! as data, so that a designer (and a user's config) can design it.
//!
//! A spec is a list of blocks applied in order to the observation. The
//! input is a window of the last `window` observations; the first block
//! decides how the window is read (an MLP block flattens it, a GRU runs
//! over it, attention reads the book levels of the newest observation).
//!
//! ```json
//! {"window": 1, "blocks": [
//!   {"kind": "dense", "width": 64, "activation": "tanh"},
//!   {"kind": "dense", "width": 64, "activation": "tanh"}]}
//! ```

use serde::{Deserialize, Serialize};

/// Activation functions a block may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// max(0, x).
    Relu,
    /// The hyperbolic tangent.
    Tanh,
    /// The Gaussian error linear unit.
    Gelu,
    /// 1 / (1 + e^-x).
    Sigmoid,
    /// x: no activation.
    Identity,
}

/// One layer or group of layers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum BlockSpec {
    /// A fully connected layer and its activation.
    Dense {
        /// Output features.
        width: usize,
        /// Applied to the output.
        #[serde(default = "default_activation")]
        activation: Activation,
    },
    /// Layer normalisation over the features.
    LayerNorm,
    /// `x + f(x)`: two dense layers of the input's width around a skip.
    Residual {
        /// Applied after each dense layer.
        #[serde(default = "default_activation")]
        activation: Activation,
    },
    /// A GRU over the observation window; its last hidden state goes on.
    /// Must be the first block.
    Gru {
        /// Width of the hidden state.
        hidden: usize,
    },
    /// Self-attention over the 5 book levels of the newest observation
    /// (each level a token of bid/ask price and size), mean-pooled and
    /// concatenated with the other features. Must be the first block.
    BookAttention {
        /// Width of each token's embedding.
        d_model: usize,
        /// Attention heads; they divide `d_model`.
        heads: usize,
    },
}

fn default_activation() -> Activation {
    Activation::Tanh
}

/// A policy network: its input window and its blocks. The heads (action
/// and value) are added by the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    /// Observations the network sees at once (1 = the current one).
    #[serde(default = "one")]
    pub window: usize,
    /// The blocks, applied in order.
    pub blocks: Vec<BlockSpec>,
}

fn one() -> usize {
    1
}

impl Default for NetworkSpec {
    /// The MLP [64, 64] with tanh of the reference PPO setups.
    fn default() -> Self {
        NetworkSpec::mlp(&[64, 64])
    }
}

/// Largest network a spec may describe: big enough for any sensible
/// execution policy, small enough that a designed one cannot exhaust memory.
pub const MAX_PARAMS: usize = 2_000_000;
/// Largest network a hand-written spec may describe when its config raises
/// the limit (`[train] max_params`, for a user with the memory and the
/// accelerator for it); designed networks keep [`MAX_PARAMS`].
pub const HARD_MAX_PARAMS: usize = 1_000_000_000;
/// Most multiply-adds a designed network's forward pass (one decision) may
/// take. A recurrent block reuses its weights at every step of the window,
/// so its compute is its parameters times the window, which
/// [`MAX_PARAMS`] alone leaves unbounded: a designed GRU of 751 units over
/// 43 steps passed it with 76 M multiply-adds a decision, 12,000 times the
/// reference network's, and trained 50 times longer than the other
/// candidates of its run. Dense and residual layers take as many as they
/// have weights, so the parameter limit bounds them already. A network
/// written by hand, or stored with a policy, is held to its parameters
/// only ([`NetworkSpec::validate_within`]).
pub const MAX_MACS: usize = 4 * MAX_PARAMS;
/// Widest layer a spec may describe.
pub const MAX_WIDTH: usize = 4096;
/// Most blocks a spec may hold.
pub const MAX_BLOCKS: usize = 32;
/// Longest observation window a spec may read.
pub const MAX_WINDOW: usize = 64;

/// Why a spec cannot be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("network spec, {field}: {message}")]
pub struct SpecError {
    /// Where: `blocks[2].width`, `window`, ...
    pub field: String,
    /// What is wrong.
    pub message: String,
}

fn err(field: impl Into<String>, message: impl Into<String>) -> SpecError {
    SpecError {
        field: field.into(),
        message: message.into(),
    }
}

/// Observation features that [`BlockSpec::BookAttention`] reads as tokens:
/// for level k, (bid price, bid size, ask price, ask size) at these offsets.
pub const BOOK_LEVELS: usize = 5;
/// Values per book-level token.
pub const BOOK_TOKEN: usize = 4;
/// Where part `part` of book level `level` sits in the observation.
pub fn book_index(level: usize, part: usize) -> usize {
    2 + part * BOOK_LEVELS + level
}

impl NetworkSpec {
    /// Dense tanh layers of these widths.
    pub fn mlp(widths: &[usize]) -> Self {
        NetworkSpec {
            window: 1,
            blocks: widths
                .iter()
                .map(|&w| BlockSpec::Dense {
                    width: w,
                    activation: Activation::Tanh,
                })
                .collect(),
        }
    }

    /// Parses a spec from JSON, naming the field that is wrong.
    pub fn from_json(text: &str) -> Result<Self, SpecError> {
        serde_json::from_str(text).map_err(|e| {
            err(
                format!("line {} column {}", e.line(), e.column()),
                e.to_string(),
            )
        })
    }

    /// Checks a designed spec for an observation of `obs_dim` features and
    /// returns the width of the features it produces, its parameter count
    /// (without the heads) and its multiply-adds, within the designer's
    /// [`MAX_PARAMS`] and [`MAX_MACS`].
    pub fn validate(&self, obs_dim: usize) -> Result<Shape, SpecError> {
        self.check(obs_dim, MAX_PARAMS, MAX_MACS)
    }

    /// [`NetworkSpec::validate`] with at most `max_params` parameters
    /// (without the heads) and no limit on its compute: a network written
    /// by hand, or stored with a trained policy, builds at whatever size
    /// it was given.
    pub fn validate_within(&self, obs_dim: usize, max_params: usize) -> Result<Shape, SpecError> {
        self.check(obs_dim, max_params, usize::MAX)
    }

    fn check(
        &self,
        obs_dim: usize,
        max_params: usize,
        max_macs: usize,
    ) -> Result<Shape, SpecError> {
        if self.window == 0 || self.window > MAX_WINDOW {
            return Err(err(
                "window",
                format!("{} is not in 1..={MAX_WINDOW}", self.window),
            ));
        }
        if self.blocks.len() > MAX_BLOCKS {
            return Err(err(
                "blocks",
                format!("{} blocks; at most {MAX_BLOCKS}", self.blocks.len()),
            ));
        }
        let mut width = obs_dim * self.window;
        let mut params = 0usize;
        let mut macs = 0usize;
        for (i, b) in self.blocks.iter().enumerate() {
            let cost = self.block_cost(i, b, obs_dim, width)?;
            params = params.saturating_add(cost.params);
            macs = macs.saturating_add(cost.macs);
            width = cost.width;
            if params > max_params {
                return Err(err(
                    format!("blocks[{i}]"),
                    format!("the network reaches {params} parameters here; at most {max_params}"),
                ));
            }
            if macs > max_macs {
                return Err(err(
                    format!("blocks[{i}]"),
                    format!(
                        "one decision takes {macs} multiply-adds here (a recurrent block's weights work at each of the window's {} steps); at most {max_macs}",
                        self.window
                    ),
                ));
            }
        }
        Ok(Shape {
            features: width,
            params,
            macs,
        })
    }

    /// Block `i`'s parameters and multiply-adds a decision, and the width
    /// it hands on, given the `width` it reads; checked.
    fn block_cost(
        &self,
        i: usize,
        block: &BlockSpec,
        obs_dim: usize,
        width: usize,
    ) -> Result<BlockCost, SpecError> {
        let at = |f: &str| format!("blocks[{i}].{f}");
        let check_width = |w: usize, f: &str| {
            if w == 0 || w > MAX_WIDTH {
                Err(err(at(f), format!("{w} is not in 1..={MAX_WIDTH}")))
            } else {
                Ok(())
            }
        };
        let cost = |params: usize, macs: usize, width: usize| BlockCost {
            params,
            macs,
            width,
        };
        Ok(match *block {
            BlockSpec::Dense { width: w, .. } => {
                check_width(w, "width")?;
                cost(width.saturating_mul(w) + w, width.saturating_mul(w), w)
            }
            BlockSpec::LayerNorm => cost(2 * width, 0, width),
            BlockSpec::Residual { .. } => {
                let square = width.saturating_mul(width);
                cost(2 * (square + width), 2 * square, width)
            }
            BlockSpec::Gru { hidden } => {
                if i != 0 {
                    return Err(err(
                        at("kind"),
                        "a GRU reads the observation window, so it must be the first block",
                    ));
                }
                check_width(hidden, "hidden")?;
                let params = 3 * (obs_dim * hidden + hidden * hidden + 2 * hidden);
                // The same weights at every step of the window.
                let step = 3 * (obs_dim * hidden + hidden * hidden);
                cost(params, step.saturating_mul(self.window), hidden)
            }
            BlockSpec::BookAttention { d_model, heads } => {
                if i != 0 {
                    return Err(err(
                        at("kind"),
                        "book attention reads the raw observation, so it must be the first block",
                    ));
                }
                if obs_dim < 2 + BOOK_TOKEN * BOOK_LEVELS {
                    let why = format!(
                        "the observation has {obs_dim} features, too few for 5 book levels"
                    );
                    return Err(err(at("kind"), why));
                }
                check_width(d_model, "d_model")?;
                if heads == 0 || d_model % heads != 0 {
                    return Err(err(
                        at("heads"),
                        format!("{heads} heads do not divide d_model = {d_model}"),
                    ));
                }
                // Token embedding and the four attention projections.
                let params = BOOK_TOKEN * d_model + d_model + 4 * (d_model * d_model + d_model);
                // Per token the embedding and the projections, then the
                // scores and the weighted values over the tokens.
                let per_token = BOOK_TOKEN * d_model + 4 * d_model * d_model;
                let macs = BOOK_LEVELS * per_token + 2 * BOOK_LEVELS * BOOK_LEVELS * d_model;
                let width = d_model + obs_dim * self.window - BOOK_TOKEN * BOOK_LEVELS;
                cost(params, macs, width)
            }
        })
    }
}

/// What one block of a network costs, and the width it hands on.
struct BlockCost {
    params: usize,
    macs: usize,
    width: usize,
}

/// What a valid spec produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Width of the last block's output (the heads' input).
    pub features: usize,
    /// Parameters of the blocks (without the heads).
    pub params: usize,
    /// Multiply-adds of the blocks' forward pass, one decision (at most
    /// [`MAX_MACS`] for a designed network).
    pub macs: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_a_64_64_mlp() {
        let s = NetworkSpec::default().validate(29).unwrap();
        assert_eq!(s.features, 64);
        assert_eq!(s.params, 29 * 64 + 64 + 64 * 64 + 64);
    }

    #[test]
    fn a_billion_parameter_network_is_refused_with_the_block_named() {
        let spec = NetworkSpec::mlp(&[4096, 4096, 4096]);
        let e = spec.validate(29).unwrap_err();
        assert_eq!(e.field, "blocks[1]");
        assert!(e.message.contains("parameters"), "{e}");
    }

    /// A recurrent block's weights work at every step of the window: a GRU
    /// well within the parameter limit is refused over a long window, by
    /// its compute, and taken over a short one.
    #[test]
    fn a_gru_over_a_long_window_is_refused_by_its_compute() {
        let gru = |window: usize| NetworkSpec {
            window,
            blocks: vec![BlockSpec::Gru { hidden: 751 }],
        };
        let e = gru(43).validate(29).unwrap_err();
        assert_eq!(e.field, "blocks[0]");
        assert!(
            e.message.contains("multiply-adds") && e.message.contains("43 steps"),
            "{e}"
        );
        // Written by hand (or stored with a policy), it is held to its
        // parameters only.
        let s = gru(43).validate_within(29, MAX_PARAMS).unwrap();
        assert_eq!(s.macs, 43 * 3 * (29 * 751 + 751 * 751));
        let s = gru(4).validate(29).unwrap();
        assert!(
            s.params < MAX_PARAMS && s.macs == 4 * 3 * (29 * 751 + 751 * 751),
            "{s:?}"
        );
        // A network of dense layers does as many multiply-adds as it has
        // weights, always within the limit its parameters keep.
        let s = NetworkSpec::mlp(&[1024, 1024]).validate(29).unwrap();
        assert_eq!(s.macs, 29 * 1024 + 1024 * 1024);
    }

    #[test]
    fn unknown_layer_kinds_and_misplaced_grus_are_clear_errors() {
        let e = NetworkSpec::from_json(r#"{"blocks":[{"kind":"conv3d","width":3}]}"#).unwrap_err();
        assert!(e.message.contains("conv3d"), "{e}");
        let spec = NetworkSpec::from_json(
            r#"{"window":4,"blocks":[{"kind":"dense","width":8},{"kind":"gru","hidden":8}]}"#,
        )
        .unwrap();
        assert_eq!(spec.validate(29).unwrap_err().field, "blocks[1].kind");
        let spec = NetworkSpec::from_json(
            r#"{"blocks":[{"kind":"book_attention","d_model":10,"heads":3}]}"#,
        )
        .unwrap();
        assert_eq!(spec.validate(29).unwrap_err().field, "blocks[0].heads");
    }
}
