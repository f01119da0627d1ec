pub mod backtest;
pub mod bench;
pub mod data;
pub mod lob;
pub mod simulate;
pub mod train;
