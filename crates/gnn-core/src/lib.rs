//! gnn-core
