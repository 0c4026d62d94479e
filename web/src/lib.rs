//! # csd-web: the dashboard (to come)
//!
//! An axum server with a JSON API over the run store and an embedded static dashboard:
//! latency breakdowns with PAO, fsync tails, run comparisons.
