pub mod data;
pub mod lob;
