//! SQLite persistence of mesh state (`<state_dir>/mesh.db`).
