pub mod deep;
pub struct Y;
