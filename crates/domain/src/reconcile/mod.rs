//! Level-triggered reconciliation of one cluster (in progress).
