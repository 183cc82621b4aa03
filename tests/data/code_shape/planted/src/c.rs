pub struct Z;
