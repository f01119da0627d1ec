//! Teams from the command line, as the README runs them on the bundled
//! data: MAPPO and independent PPO trained, then backtested together with
//! N TWAPs, per agent and as teams; and the errors a user sees.

use crate::common;

use common::{read_json, serl, text};

/// `serl train` of a short team run into `dir`.
fn train_team(dir: &std::path::Path, algo: &str, mode: &str) -> std::process::Output {
    serl(&[
        "train",
        "--config",
        "configs/train-team.toml",
        "--data",
        "data/lean",
        "--algo",
        algo,
        "--agents",
        "4",
        "--mode",
        mode,
        "--total-steps",
        "512",
        "--out",
        dir.to_str().unwrap(),
    ])
}

#[test]
fn mappo_and_ippo_train_and_play_together_in_a_team_backtest() {
    let tmp = tempfile::tempdir().unwrap();
    let (mappo, ippo) = (tmp.path().join("mappo"), tmp.path().join("ippo"));
    let o = train_team(&mappo, "mappo", "cooperative");
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("backtest the team"), "{}", text(&o));
    let meta = read_json(&mappo.join("final.json"));
    assert_eq!(meta["team"]["agents"], 4);
    assert_eq!(meta["team"]["critic"], "centralized");
    assert_eq!(
        meta["team"]["communication"]["broadcast"][1]["name"],
        "behind"
    );
    let o = train_team(&ippo, "ippo", "cooperative");
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        read_json(&ippo.join("final.json"))["team"]["critic"],
        "local"
    );

    let out = tmp.path().join("backtest");
    let o = serl(&[
        "backtest",
        "--data",
        "data/lean",
        "--split",
        "test",
        "--team",
        mappo.to_str().unwrap(),
        "--team",
        ippo.to_str().unwrap(),
        "--strategy",
        "twap",
        "--silence",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let s = read_json(&out.join("summary.json"));
    assert_eq!(s["agents"], 4);
    let summaries = s["summaries"].as_array().unwrap();
    // Two teams, each silenced too, and four TWAPs; in the dynamic market.
    assert_eq!(summaries.len(), 5, "{s}");
    for t in summaries {
        assert_eq!(t["team"]["env"], "dynamic");
        assert_eq!(
            t["members"].as_array().unwrap().len(),
            4,
            "a table per agent"
        );
    }
    let paired: Vec<&str> = s["paired"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["what"].as_str().unwrap())
        .collect();
    for want in [
        "mappo:mappo − ippo:ippo",
        "mappo:mappo − mappo:mappo (silent)",
        "ippo:ippo − twap",
    ] {
        assert!(paired.contains(&want), "{want} missing from {paired:?}");
    }
    assert!(s["crowding"][0]["what"]
        .as_str()
        .unwrap()
        .starts_with("crowding cost: twap"));
    assert!(
        s["alone"][0]["orders"].as_u64().unwrap() > 0,
        "TWAP alone on the whole orders"
    );
    let csv = std::fs::read_to_string(out.join("team.csv")).unwrap();
    assert!(csv
        .lines()
        .next()
        .unwrap()
        .ends_with("agent3_pa_bps,agent3_unfilled"));
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("Per agent") && html.contains("<svg"),
        "tables and the plot"
    );
}

#[test]
fn competitors_are_judged_on_their_own_orders() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("rivals");
    let o = train_team(&run, "mappo", "competitive");
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        read_json(&run.join("final.json"))["team"]["mode"],
        "competitive"
    );
    let out = tmp.path().join("bt");
    let o = serl(&[
        "backtest",
        "--data",
        "data/lean",
        "--split",
        "test",
        "--team",
        run.to_str().unwrap(),
        "--strategy",
        "twap",
        "--env",
        "both",
        "--held-out",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let s = read_json(&out.join("summary.json"));
    assert_eq!(s["mode"], "competitive");
    let envs: std::collections::BTreeSet<&str> = s["summaries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["team"]["env"].as_str().unwrap())
        .collect();
    let want = [
        "dynamic",
        "dynamic:informed",
        "dynamic:momentum",
        "dynamic:thin",
        "static",
    ];
    assert_eq!(envs.into_iter().collect::<Vec<_>>(), want);
    // A competitor's score is its members' mean PA.
    let t = &s["summaries"][0];
    let members: f64 = t["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["pa"]["mean"].as_f64().unwrap())
        .sum::<f64>()
        / 4.0;
    assert!(
        (t["score"]["mean"].as_f64().unwrap() - members).abs() < 1e-9,
        "{t}"
    );
}

#[test]
fn team_commands_refuse_what_cannot_be_a_team() {
    let tmp = tempfile::tempdir().unwrap();
    let o = serl(&[
        "train",
        "--data",
        "data/lean",
        "--algo",
        "ddqn",
        "--agents",
        "4",
        "--out",
        tmp.path().join("x").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("a team learns with PPO"), "{}", text(&o));
    let o = serl(&[
        "train",
        "--data",
        "data/lean",
        "--algo",
        "mappo",
        "--agents",
        "17",
        "--out",
        tmp.path().join("y").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("team.agents: 17"), "{}", text(&o));
    let o = serl(&[
        "backtest",
        "--data",
        "data/lean",
        "--team",
        "no/such/run",
        "--agents",
        "4",
        "--out",
        tmp.path().join("z").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("no/such/run does not exist"),
        "{}",
        text(&o)
    );
    // A single agent's policy is not a team.
    let single = tmp.path().join("single");
    let o = serl(&[
        "train",
        "--data",
        "data/lean",
        "--decision-minutes",
        "30",
        "--total-steps",
        "256",
        "--hybrid",
        "static-only",
        "--out",
        single.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let o = serl(&[
        "backtest",
        "--data",
        "data/lean",
        "--team",
        single.to_str().unwrap(),
        "--out",
        tmp.path().join("w").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("a single agent's policy, not a team's"),
        "{}",
        text(&o)
    );
}
