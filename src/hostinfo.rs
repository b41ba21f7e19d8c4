//! Host facts (CPU, memory, kernel, tool versions) for manifests, and resource samples
//! from procfs during a run.
