//! Citation tags, quotes, grading, best span and snapping per `ground-v1`.
