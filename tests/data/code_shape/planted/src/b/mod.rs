pub struct X;
pub fn f() -> super::a::Y {
    crate::c::Z;
    super::a::Y
}
