//! The moot: a grounded conversation between two books, free of IO.

pub mod transcript;
