pub mod backtest;
pub mod bench;
pub mod data;
pub mod evolve;
pub mod lob;
pub mod prompts;
pub mod simulate;
pub mod train;
