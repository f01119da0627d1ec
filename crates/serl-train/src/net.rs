//! The burn modules built from a [`NetworkSpec`]: the shared trunk, the
//! actor-critic of PPO and the Q-network of DDQN.
//!
//! Every network takes a batch of observation windows `[batch, window *
//! obs_dim]`, the newest observation last, so that rollouts and replay
//! buffers store plain rows whatever the architecture.

use burn::module::{Module, Param};
use burn::nn::attention::{MhaInput, MultiHeadAttention, MultiHeadAttentionConfig};
use burn::nn::gru::{Gru, GruConfig};
use burn::nn::{LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::{activation, Device, Tensor};

use serl_design::{
    book_index, Activation, BlockSpec, NetworkSpec, SpecError, BOOK_LEVELS, BOOK_TOKEN,
};

fn act(a: Activation, x: Tensor<2>) -> Tensor<2> {
    match a {
        Activation::Relu => activation::relu(x),
        Activation::Tanh => activation::tanh(x),
        Activation::Gelu => activation::gelu(x),
        Activation::Sigmoid => activation::sigmoid(x),
        Activation::Identity => x,
    }
}

/// What a layer norm adds to the variance before its square root (burn's
/// default; the fused learner's layer norm uses the same).
pub(crate) const LAYER_NORM_EPSILON: f64 = 1e-5;

/// A linear layer and its activation (`BlockSpec::Dense`).
#[derive(Module, Debug)]
pub struct Dense {
    linear: Linear,
    #[module(skip)]
    pub(crate) activation: Activation,
}

impl Dense {
    pub(crate) fn linear(&self) -> &Linear {
        &self.linear
    }

    pub(crate) fn linear_mut(&mut self) -> &mut Linear {
        &mut self.linear
    }
}

/// x + W₂·act(W₁·x), at constant width (`BlockSpec::Residual`).
#[derive(Module, Debug)]
pub struct Residual {
    first: Linear,
    second: Linear,
    #[module(skip)]
    pub(crate) activation: Activation,
}

impl Residual {
    pub(crate) fn first(&self) -> &Linear {
        &self.first
    }

    pub(crate) fn second(&self) -> &Linear {
        &self.second
    }

    pub(crate) fn first_mut(&mut self) -> &mut Linear {
        &mut self.first
    }

    pub(crate) fn second_mut(&mut self) -> &mut Linear {
        &mut self.second
    }
}

/// A GRU over the observation window, oldest first; outputs its last
/// hidden state (`BlockSpec::Gru`).
#[derive(Module, Debug)]
pub struct WindowGru {
    gru: Gru,
    #[module(skip)]
    window: usize,
    #[module(skip)]
    obs_dim: usize,
}

impl WindowGru {
    /// The GRU itself (the fused learner reads and writes its weights).
    pub(crate) fn gru(&self) -> &Gru {
        &self.gru
    }

    pub(crate) fn gru_mut(&mut self) -> &mut Gru {
        &mut self.gru
    }

    /// Observations in its window.
    pub(crate) fn window(&self) -> usize {
        self.window
    }

    /// Columns of one observation.
    pub(crate) fn obs_dim(&self) -> usize {
        self.obs_dim
    }
}

/// Self-attention over the newest observation's book levels, one token
/// per level, mean-pooled and put before the other columns
/// (`BlockSpec::BookAttention`).
#[derive(Module, Debug)]
pub struct BookAttention {
    embed: Linear,
    attention: MultiHeadAttention,
    /// Columns of the flattened window that are not book levels of the
    /// newest observation.
    #[module(skip)]
    rest: Vec<usize>,
    #[module(skip)]
    book: Vec<usize>,
}

impl BookAttention {
    /// The token embedding (the fused learner reads and writes it).
    pub(crate) fn embed(&self) -> &Linear {
        &self.embed
    }

    /// The attention (the fused learner reads and writes its layers).
    pub(crate) fn attention(&self) -> &MultiHeadAttention {
        &self.attention
    }

    /// Both, to write.
    pub(crate) fn parts_mut(&mut self) -> (&mut Linear, &mut MultiHeadAttention) {
        (&mut self.embed, &mut self.attention)
    }

    /// The input columns of the tokens, token-major.
    pub(crate) fn book(&self) -> &[usize] {
        &self.book
    }

    /// The input columns passed through after the pooled tokens.
    pub(crate) fn rest(&self) -> &[usize] {
        &self.rest
    }
}

// Blocks are built once per network and never moved in a hot loop.
#[allow(clippy::large_enum_variant)]
/// One built block of a trunk, one variant per `BlockSpec`.
#[derive(Module, Debug)]
pub enum Block {
    /// A dense layer.
    Dense(Dense),
    /// A layer norm.
    Norm(LayerNorm),
    /// A residual pair of dense layers.
    Residual(Residual),
    /// A GRU over the window.
    Gru(WindowGru),
    /// Attention over the book levels.
    Attention(BookAttention),
}

impl Block {
    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        match self {
            Block::Dense(d) => act(d.activation, d.linear.forward(x)),
            Block::Norm(n) => n.forward(x),
            Block::Residual(r) => {
                let h = act(r.activation, r.first.forward(x.clone()));
                x + r.second.forward(h)
            }
            Block::Gru(g) => {
                let [b, _] = x.dims();
                let seq = x.reshape([b, g.window, g.obs_dim]);
                let out = g.gru.forward(seq, None);
                let d = out.dims()[2];
                out.slice([0..b, g.window - 1..g.window, 0..d])
                    .reshape([b, d])
            }
            Block::Attention(a) => {
                let [b, _] = x.dims();
                let device = x.device();
                let pick = |cols: &[usize]| {
                    let idx = Tensor::<1, burn::tensor::Int>::from_ints(
                        cols.iter()
                            .map(|&c| c as i64)
                            .collect::<Vec<_>>()
                            .as_slice(),
                        &device,
                    );
                    x.clone().select(1, idx)
                };
                let tokens = pick(&a.book).reshape([b, BOOK_LEVELS, BOOK_TOKEN]);
                let emb = a.embed.forward(tokens);
                let ctx = a.attention.forward(MhaInput::self_attn(emb)).context;
                let d = ctx.dims()[2];
                let pooled = ctx.mean_dim(1).reshape([b, d]);
                Tensor::cat(vec![pooled, pick(&a.rest)], 1)
            }
        }
    }
}

/// The blocks of a spec, in order.
#[derive(Module, Debug)]
pub struct Trunk {
    blocks: Vec<Block>,
}

impl Trunk {
    /// Builds the trunk for `obs_dim` features; returns it and the width
    /// of its output.
    pub fn new(
        spec: &NetworkSpec,
        obs_dim: usize,
        device: &Device,
    ) -> Result<(Self, usize), SpecError> {
        // The size limit is the config's, checked before training
        // (`TrainConfig::validate`); a stored policy builds at whatever
        // size it was trained.
        let shape = spec.validate_within(obs_dim, serl_design::HARD_MAX_PARAMS)?;
        let mut width = obs_dim * spec.window;
        let mut blocks = Vec::with_capacity(spec.blocks.len());
        for b in &spec.blocks {
            let block = match *b {
                BlockSpec::Dense {
                    width: w,
                    activation,
                } => {
                    let linear = LinearConfig::new(width, w).init(device);
                    width = w;
                    Block::Dense(Dense { linear, activation })
                }
                BlockSpec::LayerNorm => Block::Norm(
                    LayerNormConfig::new(width)
                        .with_epsilon(LAYER_NORM_EPSILON)
                        .init(device),
                ),
                BlockSpec::Residual { activation } => Block::Residual(Residual {
                    first: LinearConfig::new(width, width).init(device),
                    second: LinearConfig::new(width, width).init(device),
                    activation,
                }),
                BlockSpec::Gru { hidden } => {
                    width = hidden;
                    Block::Gru(WindowGru {
                        gru: GruConfig::new(obs_dim, hidden, true).init(device),
                        window: spec.window,
                        obs_dim,
                    })
                }
                BlockSpec::BookAttention { d_model, heads } => {
                    let newest = (spec.window - 1) * obs_dim;
                    let mut book = Vec::new();
                    for level in 0..BOOK_LEVELS {
                        for part in 0..BOOK_TOKEN {
                            book.push(newest + book_index(level, part));
                        }
                    }
                    let rest: Vec<usize> = (0..width).filter(|c| !book.contains(c)).collect();
                    width = d_model + rest.len();
                    Block::Attention(BookAttention {
                        embed: LinearConfig::new(BOOK_TOKEN, d_model).init(device),
                        attention: MultiHeadAttentionConfig::new(d_model, heads)
                            .with_dropout(0.0)
                            .init(device),
                        rest,
                        book,
                    })
                }
            };
            blocks.push(block);
        }
        debug_assert_eq!(width, shape.features);
        Ok((Trunk { blocks }, width))
    }

    pub(crate) fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    pub(crate) fn blocks_mut(&mut self) -> &mut [Block] {
        &mut self.blocks
    }

    /// Runs the blocks in order over `[batch, window * obs_dim]` rows.
    pub fn forward(&self, mut x: Tensor<2>) -> Tensor<2> {
        for b in &self.blocks {
            x = b.forward(x);
        }
        x
    }
}

/// What the policy head outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Head {
    /// A squashed Gaussian over [0, 1]: mean of the pre-squash variable and
    /// a learned, state-independent log standard deviation.
    Gaussian,
    /// Logits over `n` discrete actions.
    Categorical(usize),
}

/// PPO's actor-critic: separate trunks for the policy and the value, as in
/// the reference MlpPolicy.
#[derive(Module, Debug)]
pub struct ActorCritic {
    /// The policy's trunk.
    pub actor: Trunk,
    /// The value's trunk.
    pub critic: Trunk,
    /// Gaussian mean (one output) or logits (one per action), initialised
    /// near zero.
    pub policy_head: Linear,
    /// The state value.
    pub value_head: Linear,
    /// The Gaussian's log standard deviation, learned and the same for
    /// every state (starts at −0.5; unused by a categorical head).
    pub log_std: Param<Tensor<1>>,
}

/// The critic of a centralised (MAPPO) actor-critic: the actor's blocks
/// where they all read any row (dense layers, layer norms, residual
/// blocks), else a [64, 64] tanh MLP; over one joint row (window 1), since
/// a GRU's or book attention's column layout is an observation window's.
pub fn joint_critic_spec(spec: &NetworkSpec) -> NetworkSpec {
    let plain = spec.blocks.iter().all(|b| {
        matches!(
            b,
            BlockSpec::Dense { .. } | BlockSpec::LayerNorm | BlockSpec::Residual { .. }
        )
    });
    NetworkSpec {
        window: 1,
        blocks: if plain {
            spec.blocks.clone()
        } else {
            NetworkSpec::mlp(&[64, 64]).blocks
        },
    }
}

impl ActorCritic {
    /// Builds both trunks from `spec` and the heads `head` needs.
    pub fn new(
        spec: &NetworkSpec,
        obs_dim: usize,
        head: Head,
        device: &Device,
    ) -> Result<Self, SpecError> {
        Self::with_critic_input(spec, obs_dim, None, head, device)
    }

    /// [`ActorCritic::new`], with a centralised critic over rows of
    /// `joint` columns ([`joint_critic_spec`]) when given, instead of one
    /// over the actor's input.
    pub fn with_critic_input(
        spec: &NetworkSpec,
        obs_dim: usize,
        joint: Option<usize>,
        head: Head,
        device: &Device,
    ) -> Result<Self, SpecError> {
        let (actor, w) = Trunk::new(spec, obs_dim, device)?;
        let (critic, cw) = match joint {
            Some(cols) => Trunk::new(&joint_critic_spec(spec), cols, device)?,
            None => Trunk::new(spec, obs_dim, device)?,
        };
        let outputs = match head {
            Head::Gaussian => 1,
            Head::Categorical(n) => n,
        };
        let small = burn::nn::Initializer::Uniform {
            min: -0.01,
            max: 0.01,
        };
        Ok(ActorCritic {
            actor,
            critic,
            policy_head: LinearConfig::new(w, outputs)
                .with_initializer(small)
                .init(device),
            value_head: LinearConfig::new(cw, 1).init(device),
            log_std: Param::from_tensor(Tensor::full([1], -0.5, device)),
        })
    }

    /// Policy output (`[batch, outputs]`: the Gaussian mean or the logits).
    pub fn policy(&self, x: Tensor<2>) -> Tensor<2> {
        self.policy_head.forward(self.actor.forward(x))
    }

    /// State values, `[batch]`.
    pub fn value(&self, x: Tensor<2>) -> Tensor<1> {
        let v = self.value_head.forward(self.critic.forward(x));
        let b = v.dims()[0];
        v.reshape([b])
    }
}

/// DDQN's Q-network: one Q value per discrete action.
#[derive(Module, Debug)]
pub struct QNetwork {
    /// The trunk.
    pub trunk: Trunk,
    /// One output per action.
    pub head: Linear,
}

impl QNetwork {
    /// Builds the trunk from `spec` and a head of `actions` outputs.
    pub fn new(
        spec: &NetworkSpec,
        obs_dim: usize,
        actions: usize,
        device: &Device,
    ) -> Result<Self, SpecError> {
        let (trunk, w) = Trunk::new(spec, obs_dim, device)?;
        Ok(QNetwork {
            trunk,
            head: LinearConfig::new(w, actions).init(device),
        })
    }

    /// Q values, `[batch, actions]`.
    pub fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.head.forward(self.trunk.forward(x))
    }
}
