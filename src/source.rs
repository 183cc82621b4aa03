//! Reading a book from a path or an http(s) URL, with size limits.
