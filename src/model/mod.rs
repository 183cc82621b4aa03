//! The node's local model behind one chat-completion interface.
