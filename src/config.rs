//! Layered configuration: TOML file, GROVE_* env, flags, validated.
