mod grounding;
mod moot;
