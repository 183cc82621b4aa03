use crate::b::X;
use crate::c::Z;
