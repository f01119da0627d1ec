//! Hostile and broken designer replies: every one is rejected with a
//! precise message, and none panics or hangs.

#[path = "../../serl-expr/tests/gbnf/mod.rs"]
mod gbnf;

use std::path::Path;
use std::time::{Duration, Instant};

use serl_data::{load, DataConfig, Split};
use serl_design::{extract, reward_vars, smoke_test, Module, ModuleKind, SmokeReport, StateModule};
use serl_env::{generate_orders, EnvConfig, MarketData, OrderConfig};
use serl_expr::Program;

use ModuleKind::*;

fn corpus() -> Vec<(ModuleKind, String, &'static str)> {
    let deep = format!("{}step_pa{}", "(".repeat(200), ")".repeat(200));
    let huge = vec!["step_pa"; 2000].join(" + ");
    let long_num = "9".repeat(5000);
    let nested_json = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let many_features = format!(
        "{{\"features\": [{}]}}",
        (0..40)
            .map(|i| format!("{{\"name\": \"f{i}\", \"program\": \"time_left\"}}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    vec![
        // Empty and prose.
        (Reward, "".into(), "empty"),
        (Reward, "   \n\t ".into(), "empty"),
        (State, "".into(), "empty"),
        (Architecture, "I think a deep network would work well here.".into(), "no JSON"),
        (Imagination, "Let me think step by step about volatility.".into(), "no JSON"),
        (Profiling, "Sorry, I cannot help with that.".into(), "no JSON"),
        (Communication, "The agents should share their inventory.".into(), "no JSON"),
        (Reward, "The reward should penalise inventory.".into(), "unexpected character `.`"),
        (Reward, "The reward should penalise inventory".into(), "expected the end of the program, found `reward`"),
        // A wrong language.
        (Reward, "```python\ndef reward(s):\n    return s.pa\n```".into(), "no loops or blocks"),
        (Reward, "```python\nimport os\nos.system('rm -rf /')\n```".into(), "unexpected character `.`"),
        (Reward, "lambda s: s['step_pa']".into(), "no loops or blocks"),
        (Reward, "fn reward(x: f64) -> f64 { x }".into(), "no loops or blocks"),
        (Reward, "for i in range(10): total += i".into(), "no loops"),
        (Reward, "while true do step_pa".into(), "expected the end of the program, found `true`"),
        (Reward, "step_pa; remaining_inv".into(), "expected the end"),
        (Reward, "x = step_pa\nreturn x".into(), "expected the end of the program, found `=`"),
        (Reward, "step_pa if done else 0".into(), "expected the end"),
        (Reward, "done ? 1 : 0".into(), "if c then a else b"),
        (Reward, "[step_pa, 1]".into(), "no lists"),
        (Reward, "{\"reward\": \"step_pa\"}".into(), "no lists"),
        // Unknown variables and functions.
        (Reward, "step_pa - remaining_inventory".into(), "did you mean `remaining_inv`"),
        (Reward, "pa - 2 * inventory".into(), "unknown name `pa`"),
        (Reward, "step_pa - penalty(remaining_inv)".into(), "unknown function `penalty`"),
        (Reward, "step_pa - sqr(remaining_inv)".into(), "did you mean `sqrt`"),
        (Reward, "reward_prev + step_pa".into(), "unknown name `reward_prev`"),
        (State, r#"{"features": [{"name": "a", "program": "mean(price, 5)"}]}"#.into(), "unknown name `price`"),
        (Communication, r#"{"broadcast": [{"name": "a", "program": "my_inventory"}], "aggregate": "mean"}"#.into(), "unknown name `my_inventory`"),
        // Type errors.
        (Reward, "if remaining_inv then 1 else 0".into(), "must be a condition"),
        (Reward, "step_pa > 0".into(), "must give a number"),
        (Reward, "(step_pa > 0) + 1".into(), "must be a number"),
        // Huge expressions and deep nesting.
        (Reward, deep, "deeper"),
        (Reward, huge, "bytes"),
        (Reward, long_num, "bytes"),
        (Reward, format!("{}step_pa", "-".repeat(300)), "deeper"),
        (Architecture, nested_json, "invalid JSON"),
        (State, many_features, "at most 32"),
        // NaN-producing and ill-formed numeric designs.
        (Reward, "mean(step_pa, 5)".into(), "window functions belong in state features"),
        (Reward, "clip(step_pa, 1)".into(), "takes 3 arguments"),
        (State, r#"{"features": [{"name": "a", "program": "mean(volume, 0)"}]}"#.into(), "whole number from 1 to 64"),
        (State, r#"{"features": [{"name": "a", "program": "ema(volume + 1, 3)"}]}"#.into(), "must be a variable name"),
        // Invalid JSON specs.
        (Architecture, "{\"window\": 1, \"blocks\": [".into(), "no JSON"),
        (Architecture, "{\"window\": 1, \"blocks\": [{\"kind\": \"dense\", \"width\": 64,}]}".into(), "invalid JSON"),
        (Architecture, r#"{"window": 1, "blocks": [{"kind": "transformer_xl", "width": 64}]}"#.into(), "transformer_xl"),
        (Architecture, r#"{"window": 1, "blocks": [{"kind": "dense", "width": -5}]}"#.into(), "invalid JSON"),
        (Architecture, r#"{"window": 0, "blocks": []}"#.into(), "window"),
        (Architecture, r#"{"blocks": [{"kind": "dense", "width": 0}]}"#.into(), "blocks[0].width"),
        (Architecture, r#"{"window": 4, "blocks": [{"kind": "dense", "width": 8}, {"kind": "gru", "hidden": 8}]}"#.into(), "first block"),
        (Imagination, r#"{"scenarios": []}"#.into(), "1 to 8 scenarios"),
        (Imagination, r#"{"scenarios": [{"volatility_mult": 1e9, "drift_bps": 0, "liquidity_mult": 1, "jumps": []}]}"#.into(), "volatility_mult"),
        (Imagination, r#"{"scenarios": [{"volatility_mult": 1, "drift_bps": 0, "liquidity_mult": 1, "jumps": [[900, 5]]}]}"#.into(), "minute"),
        (Imagination, r#"{"scenarios": [{"volatility": 2}]}"#.into(), "unknown field `volatility`"),
        (Profiling, r#"{"market": {"noise_agents": 1000000}}"#.into(), "agents"),
        (Profiling, r#"{"market": {"market_makers": 0}}"#.into(), "market_makers = 0"),
        (Profiling, r#"{"market": {"cancel_share": 3.0}}"#.into(), "cancel_share"),
        (Communication, r#"{"broadcast": [], "aggregate": "mean"}"#.into(), "1 to 8"),
        (Communication, r#"{"broadcast": [{"name": "a", "program": "time_left"}], "aggregate": "median"}"#.into(), "median"),
        // Networks with 10^9 parameters.
        (Architecture, r#"{"blocks": [{"kind": "dense", "width": 4096}, {"kind": "dense", "width": 4096}, {"kind": "dense", "width": 4096}]}"#.into(), "parameters"),
        (Architecture, r#"{"blocks": [{"kind": "dense", "width": 1000000000}]}"#.into(), "blocks[0].width"),
        (Architecture, r#"{"window": 64, "blocks": [{"kind": "dense", "width": 4096}, {"kind": "residual"}, {"kind": "residual"}]}"#.into(), "parameters"),
        // Attempted file paths and I/O.
        (Reward, "open('/etc/passwd')".into(), "no strings"),
        (Reward, "include(\"../../secrets\")".into(), "no strings"),
        (Reward, "/etc/passwd".into(), "expected a number"),
        (Reward, "read_file(step_pa)".into(), "unknown function `read_file`"),
        (State, r#"{"features": [{"name": "../../etc/passwd", "program": "time_left"}]}"#.into(), "letters, digits or underscores"),
        (Architecture, r#"{"window": 1, "blocks": [], "checkpoint": "/root/.ssh/id_rsa"}"#.into(), "unknown field `checkpoint`"),
        (Profiling, r#"{"market": {}, "load": "file:///etc/shadow"}"#.into(), "unknown field `load`"),
    ]
}

/// A name given twice is refused in a file; in a reply, extraction makes
/// the names unique first (a grammar cannot forbid a repeat).
#[test]
fn a_repeated_feature_name_is_refused_in_files_and_repaired_in_replies() {
    let twice = r#"{"features": [{"name": "a", "program": "time_left"}, {"name": "a", "program": "spread"}]}"#;
    let e = Module::parse(State, twice).unwrap_err().to_string();
    assert!(e.contains("defined twice"), "{e}");
    let repaired = extract(State, twice).unwrap();
    assert!(Module::parse(State, &repaired).is_ok(), "{repaired}");
}

#[test]
fn every_hostile_reply_is_rejected_with_a_precise_message() {
    let cases = corpus();
    assert!(cases.len() >= 50, "{} cases", cases.len());
    let mut wrong = Vec::new();
    for (kind, reply, needle) in cases {
        let t = Instant::now();
        let result = match extract(kind, &reply) {
            None if reply.trim().is_empty() => Err("the reply was empty".to_string()),
            None => Err("no JSON object found in the reply".to_string()),
            Some(text) => Module::parse(kind, &text).map_err(|e| e.to_string()),
        };
        let shown: String = reply.chars().take(60).collect();
        match result {
            Ok(m) => panic!("{kind:?} accepted `{shown}`: {m:?}"),
            Err(e) => {
                if !e.contains(needle) {
                    wrong.push(format!("{kind:?} `{shown}`: expected `{needle}` in: {e}"));
                }
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(1),
            "{kind:?} `{shown}` took {:?}",
            t.elapsed()
        );
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn good_replies_in_prose_and_fences_are_accepted() {
    let cases = [
        (Reward, "Here you go:\n```serl\nstep_pa - 2 * remaining_inv^2 / steps - 50 * done * remaining_inv^2\n```"),
        (State, "```json\n{\"features\": [{\"name\": \"vol5\", \"program\": \"std(ret_1, 5)\"}]}\n```"),
        (Architecture, "{\"window\": 4, \"blocks\": [{\"kind\": \"gru\", \"hidden\": 32}, {\"kind\": \"dense\", \"width\": 32}]}"),
        (Architecture, "{\"blocks\": [{\"kind\": \"book_attention\", \"d_model\": 16, \"heads\": 2}, {\"kind\": \"residual\"}, {\"kind\": \"layer_norm\"}]}"),
        (Imagination, "Scenarios: {\"scenarios\": [{\"volatility_mult\": 1.5, \"drift_bps\": -20, \"liquidity_mult\": 0.8, \"jumps\": [[60, -10]]}], \"share\": 0.5}"),
        (Profiling, "{\"market\": {\"noise_agents\": 80, \"market_makers\": 3}}"),
        (Communication, "{\"broadcast\": [{\"name\": \"inv\", \"program\": \"inventory_left\"}], \"aggregate\": \"attention\"}"),
    ];
    for (kind, reply) in cases {
        let text = extract(kind, reply).unwrap();
        Module::parse(kind, &text).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
    }
}

/// The reward programs of the corpus, as they reach the compiler: each is
/// refused by the parser and checker (or, for a window function, by the
/// reward module), and the grammar that the prompts hand to constrained
/// decoders (`reward_grammar()`) cannot derive it, except where the
/// grammar leaves the reason to the checker by design (types and bounds).
#[test]
fn hostile_reward_programs_are_refused_by_the_parser_and_by_the_grammar() {
    let vars = reward_vars();
    let g = gbnf::Grammar::parse(&serl_design::reward_grammar());
    let mut derivable = Vec::new();
    let mut refused = 0;
    for (kind, reply, needle) in corpus() {
        if kind != Reward {
            continue;
        }
        let program = extract(kind, &reply).unwrap_or(reply);
        let shown: String = program.chars().take(60).collect();
        let compiled = Program::compile(&program, &vars);
        if g.derives(&program) {
            derivable.push(needle);
        } else {
            refused += 1;
        }
        if needle == "window functions belong in state features" {
            // The language has window functions; the reward grammar and
            // the reward module do not.
            assert!(compiled.is_ok(), "`{shown}`: {:?}", compiled.err());
            assert!(!g.derives(&program), "the reward grammar writes `{shown}`");
            let e = Module::parse(kind, &program).unwrap_err().to_string();
            assert!(e.contains(needle), "`{shown}`: {e}");
            continue;
        }
        let e = compiled
            .err()
            .unwrap_or_else(|| panic!("the compiler takes `{shown}`"))
            .to_string();
        assert!(e.contains(needle), "`{shown}`: expected `{needle}` in: {e}");
    }
    // What the grammar derives and the checker refuses, and why.
    derivable.sort_unstable();
    assert_eq!(
        derivable,
        [
            // 2000 terms, and a 5000-digit number: longer than
            // Limits::max_source.
            "bytes",
            "bytes",
            // 200 nested parentheses, and 300 prefix minus signs:
            // deeper than Limits::max_depth.
            "deeper",
            "deeper",
            // Types: `if` on a number, a condition plus 1, a program that
            // is a comparison.
            "must be a condition",
            "must be a number",
            "must give a number",
        ]
    );
    assert!(
        refused >= 20,
        "{refused} reward programs the grammar cannot derive"
    );
}

/// The first training order of the bundled data and its session, as the
/// evolve loop smoke-tests designs on.
fn smoke_episode() -> (MarketData, serl_env::ParentOrder) {
    let cfg = DataConfig::default();
    let path = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"))
        .join("../../data/lean");
    let ds = load(&path, &cfg).unwrap();
    let orders = generate_orders(&ds, Split::Train, &cfg, &OrderConfig::default()).unwrap();
    (MarketData::new(&ds, &cfg), orders[0].clone())
}

/// Programs that compile but produce NaN, ±inf or a division by zero when
/// they run: the smoke test on a real episode sees every one, and either
/// refuses the design saying so or counts the repaired values.
#[test]
fn reward_programs_that_produce_nan_or_infinity_reach_the_smoke_test() {
    let (md, order) = smoke_episode();
    let view = md.get(&order.symbol, order.date).unwrap();
    let env = EnvConfig::default();
    let no_features = StateModule::default();
    let smoke = |program: &str| -> Result<SmokeReport, String> {
        // Each is a valid module: nothing here is a parse error.
        let Module::Reward(reward) =
            Module::parse(Reward, program).unwrap_or_else(|e| panic!("`{program}`: {e}"))
        else {
            unreachable!("a reward module parses as one")
        };
        smoke_test(&reward, &no_features, view, &order, &env, false).map_err(|e| e.to_string())
    };
    let sane = smoke("step_pa").unwrap();
    assert_eq!(sane.repaired, 0);
    let n = sane.steps;
    assert!(n > 2, "{n} steps");
    let every_step =
        format!("reward module: {n} of {n} steps produced NaN, infinity or a division by zero");
    for program in [
        // 0 / 0 through variables: a division by zero on every step.
        "step_pa / (done - done)",
        // The log of a negative number: NaN on every step (fill_qty <= 1).
        "log(fill_qty - 1)",
        "sqrt(-1 - volatility)",
        "(-1 - spread_bps) ^ 0.5",
    ] {
        assert_eq!(smoke(program).unwrap_err(), every_step, "`{program}`");
    }
    // Once in the episode (on its last step): repaired, counted, and
    // reported to the designer, but not refused.
    for program in [
        "step_pa + sqrt(-done)",          // NaN
        "step_pa + 1 / (1 - done)",       // a division by zero
        "step_pa + 0 * exp(1000 * done)", // +inf, repaired to 1e12, times 0
    ] {
        let r = smoke(program).unwrap_or_else(|e| panic!("`{program}`: {e}"));
        assert_eq!(r.repaired, 1, "`{program}`: {r:?}");
        assert_eq!(r.steps, n);
    }
    // +inf once, repaired to 1e12 and kept: refused for its range, the
    // message saying that the 1e12 was an infinity.
    let e = smoke("step_pa + exp(1000 * done)").unwrap_err();
    assert!(
        e.starts_with("reward module: rewards ranged over [")
            && e.ends_with(", 1.000e12] (±1e12 is an infinite value, clipped) on a TWAP episode; keep them within ±1e4 (bps-scale)"),
        "{e}"
    );
}

/// A state module that reads the resting order's queue: a placing task's
/// smoke episode rests every step's share at the touch, so the feature
/// sees a real queue; a task that only crosses refuses it, saying why.
#[test]
fn a_queue_feature_is_smoke_tested_on_resting_orders() {
    let (md, order) = smoke_episode();
    let view = md.get(&order.symbol, order.date).unwrap();
    let env = EnvConfig::default();
    let Module::State(state) = Module::parse(
        State,
        r#"{"features": [{"name": "waited", "program": "minutes_resting * 10"}]}"#,
    )
    .unwrap() else {
        unreachable!("a state module parses as one")
    };
    let reward = serl_design::RewardModule::plain();
    let r = smoke_test(&reward, &state, view, &order, &env, true).unwrap();
    let (name, lo, hi) = &r.features[0];
    assert_eq!(name, "waited");
    // Decisions every `decision_minutes`: an order kept from the step
    // before has rested that long.
    assert_eq!(*lo, 0.0, "nothing rests at the first decision");
    assert!(*hi >= env.decision_minutes as f64, "{r:?}");
    let e = smoke_test(&reward, &state, view, &order, &env, false).unwrap_err();
    assert!(
        e.to_string().contains("`waited` reads `minutes_resting`"),
        "{e}"
    );
}

/// The corpus's reward programs, as extracted from the replies.
fn hostile_rewards() -> Vec<String> {
    let programs: Vec<String> = corpus()
        .into_iter()
        .filter(|(kind, _, _)| *kind == Reward)
        .map(|(kind, reply, _)| extract(kind, &reply).unwrap_or(reply))
        .collect();
    assert!(programs.len() >= 25, "{} reward programs", programs.len());
    programs
}

/// Rewards a designer would write, which every grammar derives.
const GOOD_REWARDS: [&str; 3] = [
    "step_pa - 2 * remaining_inv ^ 2 / steps - 50 * done * remaining_inv ^ 2",
    "if done > 0.5 then -abs(remaining_inv) else clip(step_pa / 10, -1, 1)",
    "tanh(twap_gain) + 0.1 * timing",
];

/// The local backend's grammar for a reward (`reward_lark`, whose rules
/// `module_lark` embeds) refuses every reward program of the corpus: it is
/// typed, so even the ill-typed ones the GBNF leaves to the checker are
/// outside it.
#[test]
fn hostile_reward_programs_are_refused_by_the_lark_grammar() {
    let g = serl_local::Constraint::Lark(serl_design::reward_lark());
    let bytes = serl_local::ByteGrammar::new().unwrap();
    for program in hostile_rewards() {
        let shown: String = program.chars().take(60).collect();
        assert!(
            !bytes.accepts(&g, &program).unwrap(),
            "the Lark grammar derives `{shown}`"
        );
    }
    for good in GOOD_REWARDS {
        assert!(bytes.accepts(&g, good).unwrap(), "refused: {good}");
    }
}

/// The reward's GBNF reply grammar (`module_gbnf`, what `[llm] gbnf =
/// true` sends to llama.cpp) refuses every reward program of the corpus,
/// as the Lark grammar does: its programs are the same typed grammar.
#[test]
fn hostile_reward_programs_are_refused_by_the_module_gbnf() {
    let g = gbnf::Grammar::parse(&serl_design::module_gbnf(Reward));
    let reply = |program: &str| {
        let program = serde_json::to_string(program).unwrap();
        format!(r#"{{"program": {program}}}"#)
    };
    for program in hostile_rewards() {
        let shown: String = program.chars().take(60).collect();
        assert!(!g.derives(&reply(&program)), "the GBNF derives `{shown}`");
    }
    for good in GOOD_REWARDS {
        assert!(g.derives(&reply(good)), "refused: {good}");
    }
}
