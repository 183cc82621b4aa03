//! Wire types generated from `proto/` (the only serialized network formats).
