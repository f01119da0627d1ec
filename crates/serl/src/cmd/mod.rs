pub mod backtest;
pub mod data;
pub mod lob;
