//! What every request handler can reach.

use crate::jobs::{Jobs, Launcher};
use crate::store::StoreHandle;
use std::sync::Arc;

/// Everything a request handler can reach.
pub struct AppState {
    pub store: StoreHandle,
    pub jobs: Jobs,
    pub launcher: Arc<dyn Launcher>,
}
