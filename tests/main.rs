mod model;
#[path = "support/scripted_openai.rs"]
mod scripted_openai;
