//! The control API's JSON shapes: what the daemon answers on the control
//! socket and what every command prints with `--json` (examples in
//! `docs/cli-json.md`). One file per area; everything is re-exported here, so
//! a shape is named `dto::Book` wherever it is used.

mod books;
mod cli;
mod events;
mod mesh;
mod moots;
mod node;

pub use books::*;
pub use cli::*;
pub use events::*;
pub use mesh::*;
pub use moots::*;
pub use node::*;

pub use super::error::ErrorBody;
